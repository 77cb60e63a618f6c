package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLimitInFlight(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{})
	// The handler holds only the request marked ?hold=1 until released.
	h := LimitInFlight(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") == "1" {
			close(held)
			<-release
		}
	}), 1, 1)
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/api/v1/nodes/n1?hold=1", nil))
		close(done)
	}()
	<-held // the only mutating slot is taken

	tests := []struct {
		name     string
		method   string
		url      string
		wantCode int
	}{
		{"a second write is refused with 429", http.MethodPost, "/api/v1/nodes", http.StatusTooManyRequests},
		{"a watch is never counted", http.MethodGet, "/api/v1/nodes?watch=true", http.StatusOK},
		{"a read uses its own budget", http.MethodGet, "/api/v1/nodes", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.url, nil))
			if rec.Code != tt.wantCode {
				t.Fatalf("got %d, want %d", rec.Code, tt.wantCode)
			}
			if tt.wantCode == http.StatusTooManyRequests && rec.Header().Get("Retry-After") != "1" {
				t.Errorf("Retry-After %q, want 1", rec.Header().Get("Retry-After"))
			}
		})
	}
	close(release)
	<-done
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/nodes", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("after the slot is freed a write got %d, want 200", rec.Code)
	}
}

func TestLimitInFlightDoesNotCountPodLogs(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{})
	h := LimitInFlight(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") == "1" {
			close(held)
			<-release
		}
	}), 1, 1)
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/nodes?hold=1", nil))
		close(done)
	}()
	<-held // the only read slot is taken
	tests := []struct {
		name     string
		url      string
		wantCode int
	}{
		{"another read is refused", "/api/v1/pods", http.StatusTooManyRequests},
		{"a pod log is long-running and passes", "/api/v1/namespaces/default/pods/p/log?follow=true", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.url, nil))
			if rec.Code != tt.wantCode {
				t.Errorf("got %d, want %d", rec.Code, tt.wantCode)
			}
		})
	}
	close(release)
	<-done
}
