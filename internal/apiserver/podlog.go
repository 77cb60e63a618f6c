package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// agentLogPath is where a node agent serves a container's log:
// /containerLogs/<namespace>/<pod>/<container>.
const agentLogPath = "/containerLogs"

// maxAgentErrorBytes bounds how much of an agent's error answer is relayed.
const maxAgentErrorBytes = 16 << 10

// podLog serves GET pods/<name>/log: it finds the container and the node
// the pod runs on and streams the log from that node's agent, flushing as
// it arrives so that follow=true works.
//
// The agent's address and port come from the Node's status, which the node
// itself writes, so they prove nothing: what makes the request safe is
// that the client from Config.NodeClient accepts only that node's serving
// certificate, presents an identity that may do nothing but read logs, and
// that a redirect is never followed (a node could otherwise point the
// server at any URL, CVE-2020-8559).
func (h *resourceHandler) podLog(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	cur, err := h.current(r.Context(), info, 0)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	pod := cur.(*corev1.Pod)
	q := r.URL.Query()
	container, err := logContainer(pod, q.Get("container"))
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	query, err := agentLogQuery(q, h.s.cfg.Clock.Now())
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	if pod.Spec.NodeName == "" {
		writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)), gr, info.Name)
		return
	}
	host, err := h.s.agentHost(r, pod.Spec.NodeName)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	if h.s.cfg.NodeClient == nil {
		writeError(w, r, apierrors.NewServiceUnavailable("pods/log is unavailable: the API server has no client for node agents"), gr, info.Name)
		return
	}
	target := url.URL{
		Scheme:   "https",
		Host:     host,
		Path:     strings.Join([]string{agentLogPath, pod.Namespace, pod.Name, container}, "/"),
		RawQuery: query.Encode(),
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target.String(), nil)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	resp, err := noRedirects(h.s.cfg.NodeClient(pod.Spec.NodeName)).Do(req)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is in the message already
		}
		writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("cannot reach the agent of node %q at %s: %v", pod.Spec.NodeName, host, err)), gr, info.Name)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		writeStatus(w, r, agentRedirectStatus(resp, pod.Spec.NodeName))
		return
	}
	if resp.StatusCode != http.StatusOK {
		writeStatus(w, r, agentErrorStatus(resp, pod.Spec.NodeName))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	copyFlushing(w, resp.Body)
}

// logContainer picks the container whose log is asked for: the named one,
// or the pod's only container.
func logContainer(pod *corev1.Pod, name string) (string, error) {
	var names, initNames, ephemeralNames []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		initNames = append(initNames, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		ephemeralNames = append(ephemeralNames, c.Name)
	}
	if name == "" {
		if len(names) == 1 {
			return names[0], nil
		}
		msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, names)
		if len(initNames) > 0 {
			msg += fmt.Sprintf(" or one of the init containers: %v", initNames)
		}
		if len(ephemeralNames) > 0 {
			msg += fmt.Sprintf(" or one of the ephemeral containers: %v", ephemeralNames)
		}
		return "", apierrors.NewBadRequest(msg)
	}
	for _, list := range [][]string{names, initNames, ephemeralNames} {
		for _, n := range list {
			if n == name {
				return name, nil
			}
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// agentLogQuery validates the log options of the request and returns the
// query the agent gets: follow, previous, timestamps, tailLines,
// limitBytes and sinceSeconds (sinceTime is turned into sinceSeconds
// against now).
func agentLogQuery(q url.Values, now time.Time) (url.Values, error) {
	out := url.Values{}
	for _, name := range []string{"follow", "previous", "timestamps"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: invalid boolean value %q", name, v))
		}
		if b {
			out.Set(name, "true")
		}
	}
	for _, p := range []struct {
		name string
		min  int64
	}{{"tailLines", 0}, {"limitBytes", 1}, {"sinceSeconds", 1}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: invalid integer value %q", p.name, v))
		}
		if n < p.min {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: must be greater than or equal to %d, got %d", p.name, p.min, n))
		}
		out.Set(p.name, strconv.FormatInt(n, 10))
	}
	if v := q.Get("sinceTime"); v != "" {
		if out.Has("sinceSeconds") {
			return nil, apierrors.NewBadRequest("at most one of sinceTime or sinceSeconds may be specified")
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("sinceTime: invalid RFC 3339 time %q", v))
		}
		secs := int64(math.Ceil(now.Sub(t).Seconds()))
		out.Set("sinceSeconds", strconv.FormatInt(max(secs, 1), 10))
	}
	return out, nil
}

// agentHost returns host:port of the agent on node: its InternalIP (else
// its first address) and the port it reports in
// status.daemonEndpoints.kubeletEndpoint.
func (s *Server) agentHost(r *http.Request, node string) (string, error) {
	nodes := s.resources[nodesGVR]
	if nodes == nil {
		return "", apierrors.NewServiceUnavailable("pods/log is unavailable: the server does not serve nodes")
	}
	obj, err := nodes.current(r.Context(), requestInfo{Name: node}, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return "", apierrors.NewNotFound(nodes.r.GroupResource(), node)
	}
	if err != nil {
		return "", fmt.Errorf("read node %q: %w", node, err)
	}
	return agentAddress(obj.(*corev1.Node))
}

// agentAddress is host:port of a node's agent: its InternalIP (else its
// first address) and the port in status.daemonEndpoints.kubeletEndpoint.
func agentAddress(n *corev1.Node) (string, error) {
	addr := ""
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = a.Address
			break
		}
	}
	if addr == "" && len(n.Status.Addresses) > 0 {
		addr = n.Status.Addresses[0].Address
	}
	if addr == "" {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no address for its agent", n.Name))
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no agent port (status.daemonEndpoints.kubeletEndpoint.Port)", n.Name))
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port))), nil
}

// noRedirects returns a copy of c that hands a redirect back to the caller
// instead of following it.
func noRedirects(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

// agentRedirectStatus refuses an agent's redirect: 502, nothing fetched.
// The target is not echoed; it is the node's to choose.
func agentRedirectStatus(resp *http.Response, node string) *metav1.Status {
	return &metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusBadGateway,
		Reason: metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("the agent of node %q answered %s with a redirect; pods/log does not follow redirects from agents",
			node, resp.Status),
	}
}

// agentErrorStatus relays an agent's non-200 answer: its code, and its
// message (a Status' message, or the text of the body).
func agentErrorStatus(resp *http.Response, node string) *metav1.Status {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAgentErrorBytes))
	msg := strings.TrimSpace(string(body))
	reason := reasonForCode(resp.StatusCode)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
			msg = st.Message
			if st.Reason != "" {
				reason = st.Reason
			}
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("the agent of node %q answered %s", node, resp.Status)
	}
	return &metav1.Status{Status: metav1.StatusFailure, Code: int32(resp.StatusCode), Reason: reason, Message: msg}
}

func reasonForCode(code int) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		return metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		return metav1.StatusReasonTimeout
	}
	if code >= 500 {
		return metav1.StatusReasonInternalError
	}
	return metav1.StatusReasonUnknown
}

// copyFlushing copies the log to the client, flushing after every read so
// a followed log reaches it as it is written.
func copyFlushing(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	// The headers go out at once: a followed log may stay quiet for long.
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
