package h2server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// startServer serves h over HTTP/2 through a Server with cfg, on a TLS test
// listener; it returns the base URL, an HTTP/2 client and the http.Server.
func startServer(t testing.TB, cfg Config, h http.Handler) (string, *http.Client, *http.Server) {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.TLS = &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	New(cfg).Attach(ts.Config, h)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	tr := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	return ts.URL, &http.Client{Transport: tr}, ts.Config
}

func TestServesRequestsOverOneConnection(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB: past every window
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Audit-Id", "a1")
			fmt.Fprintf(w, `{"proto":%q,"host":%q,"query":%q,"tls":%t}`, r.Proto, r.Host, r.URL.RawQuery, r.TLS != nil)
		case "/echo-sum":
			sum := sha256.New()
			n, err := io.Copy(sum, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%d %x", n, sum.Sum(nil))
		case "/big":
			_, _ = w.Write(big)
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	url, client, _ := startServer(t, Config{}, h)

	tests := []struct {
		name, method, path string
		body               []byte
		wantStatus         int
		wantBody           string
		wantHeader         map[string]string
	}{
		{name: "a small GET gets its body, its headers and a content length", method: "GET", path: "/small?x=1",
			wantStatus: 200, wantBody: `{"proto":"HTTP/2.0","host":"` + strings.TrimPrefix(url, "https://") + `","query":"x=1","tls":true}`,
			wantHeader: map[string]string{"Content-Type": "application/json", "Audit-Id": "a1", "Content-Length": "70"}},
		{name: "a 3 MiB body is read whole, past the stream and connection windows", method: "POST", path: "/echo-sum", body: big,
			wantStatus: 200, wantBody: fmt.Sprintf("%d %x", len(big), sha256.Sum256(big))},
		{name: "a 3 MiB response arrives whole, past the client's windows", method: "GET", path: "/big",
			wantStatus: 200, wantBody: string(big)},
		{name: "HEAD gets the headers and no body", method: "HEAD", path: "/small", wantStatus: 200},
		{name: "204 has no body", method: "GET", path: "/nocontent", wantStatus: 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != nil {
				body = bytes.NewReader(tt.body)
			}
			req, _ := http.NewRequest(tt.method, url+tt.path, body)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus || resp.ProtoMajor != 2 {
				t.Fatalf("status %d proto %s, want %d over HTTP/2", resp.StatusCode, resp.Proto, tt.wantStatus)
			}
			if string(got) != tt.wantBody {
				t.Fatalf("body %.200q, want %.200q", got, tt.wantBody)
			}
			for k, v := range tt.wantHeader {
				if resp.Header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, resp.Header.Get(k), v)
				}
			}
			if resp.Header.Get("Date") == "" {
				t.Error("no Date header")
			}
		})
	}

	t.Run("two hundred concurrent requests share the connection", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				payload := bytes.Repeat([]byte{byte(i)}, 1000+i)
				resp, err := client.Post(url+"/echo-sum", "application/octet-stream", bytes.NewReader(payload))
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				got, _ := io.ReadAll(resp.Body)
				if want := fmt.Sprintf("%d %x", len(payload), sha256.Sum256(payload)); string(got) != want {
					errs <- fmt.Errorf("request %d: got %q, want %q", i, got, want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestAFlushedEventReachesTheClientWhileTheHandlerWaits(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "event 1")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprintln(w, "event 2")
	})
	url, client, _ := startServer(t, Config{}, h)
	resp, err := client.Get(url + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make([]byte, len("event 1\n"))
	if _, err := io.ReadFull(resp.Body, line); err != nil || string(line) != "event 1\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "event 2\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestAClientThatCancelsEndsTheHandlersContext(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(30 * time.Second):
			ended <- errors.New("context not canceled within 30 s")
		}
	})
	url, client, _ := startServer(t, Config{}, h)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/", nil)
	go func() { <-started; cancel() }()
	if _, err := client.Do(req); err == nil {
		t.Fatal("the canceled request succeeded")
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler: %v", err)
	}
}

func TestAPanickingHandlerResetsOnlyItsStream(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "ok")
	})
	url, client, _ := startServer(t, Config{}, h)
	for _, path := range []string{"/panic", "/abort"} {
		resp, err := client.Get(url + path)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Fatalf("%s: no error", path)
		}
		resp, err = client.Get(url + "/ok")
		if err != nil {
			t.Fatalf("after %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("after %s: %q", path, b)
		}
	}
}

func TestShutdownLetsRunningRequestsFinish(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	})
	url, client, hs := startServer(t, Config{}, h)
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := client.Get(url + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- result{string(b), err}
	}()
	<-started
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- hs.Shutdown(context.Background()) }()
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned (%v) while a request was running", err)
	case <-time.After(200 * time.Millisecond): // a bounded window in which Shutdown must not return
	}
	close(release)
	if r := <-got; r.err != nil || r.body != "done" {
		t.Fatalf("running request: %q, %v", r.body, r.err)
	}
	select {
	case err := <-shutdownDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the last request")
	}
}

func TestAStreamsContextEndsAtTheDeadlineItsRequestIsGiven(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := r.Context().Deadline()
		if r.URL.Path == "/none" {
			fmt.Fprintf(w, "deadline %v", ok)
			return
		}
		select {
		case <-r.Context().Done():
			fmt.Fprintf(w, "ended %v %v", r.Context().Err(), ok && !d.IsZero())
		case <-time.After(10 * time.Second):
			fmt.Fprint(w, "the context did not end within 10 s")
		}
	})
	url, client, _ := startServer(t, Config{Deadline: func(_ string, u *neturl.URL) time.Duration {
		if u.Path == "/short" {
			return 20 * time.Millisecond
		}
		return 0
	}}, h)
	for path, want := range map[string]string{"/short": "ended context deadline exceeded true", "/none": "deadline false"} {
		resp, err := client.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("%s: %q, want %q", path, body, want)
		}
	}
}
