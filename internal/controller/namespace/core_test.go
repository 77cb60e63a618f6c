package namespace

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDecide(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	terminating := func(finalizers ...corev1.FinalizerName) *corev1.Namespace {
		return &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: "team", DeletionTimestamp: &now},
			Spec:       corev1.NamespaceSpec{Finalizers: finalizers},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
		}
	}
	active := terminating(corev1.FinalizerKubernetes)
	active.DeletionTimestamp = nil
	fresh := Item{Resource: pods, Name: "fresh"}
	finalizing := Item{Resource: pods, Name: "finalizing", Deleting: true, Finalizers: 1}
	graceful := Item{Resource: pods, Name: "graceful", Deleting: true, GracePeriod: 30}
	stuck := Item{Resource: pods, Name: "stuck", Deleting: true}
	tests := []struct {
		name    string
		ns      *corev1.Namespace
		content Content
		want    Plan
	}{
		{"an active namespace needs nothing", active, Content{Items: []Item{fresh}}, Plan{}},
		{"a namespace already finalized needs nothing", terminating("example.com/other"), Content{}, Plan{}},
		{"an empty terminating namespace is finalized", terminating(corev1.FinalizerKubernetes), Content{}, Plan{Finalize: true}},
		{"finalizing keeps the other finalizers", terminating("example.com/other", corev1.FinalizerKubernetes), Content{}, Plan{Finalize: true, Finalizers: []corev1.FinalizerName{"example.com/other"}}},
		{"content is deleted and the namespace waits", terminating(corev1.FinalizerKubernetes), Content{Items: []Item{fresh}}, Plan{Delete: []Item{fresh}, Wait: true}},
		{"objects already being deleted are left to finish", terminating(corev1.FinalizerKubernetes), Content{Items: []Item{finalizing, graceful, stuck}}, Plan{Delete: []Item{stuck}, Wait: true}},
		{"a resource that could not be listed keeps the namespace", terminating(corev1.FinalizerKubernetes), Content{Failed: 1}, Plan{Wait: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.ns, tt.content)
			if got.Finalize != tt.want.Finalize || got.Wait != tt.want.Wait ||
				!slices.Equal(got.Delete, tt.want.Delete) || !slices.Equal(got.Finalizers, tt.want.Finalizers) {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}
