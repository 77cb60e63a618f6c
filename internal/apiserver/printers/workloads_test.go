package printers

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func template(names ...string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers(names...)}}
}

func TestWorkloadCells(t *testing.T) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	created := metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(26 * time.Hour)}
	tests := []struct {
		name    string
		printer Printer
		obj     runtime.Object
		want    []interface{}
	}{
		{
			name:    "a deployment shows ready of desired, updated and available",
			printer: Deployments(),
			obj: &appsv1.Deployment{
				ObjectMeta: created,
				Spec:       appsv1.DeploymentSpec{Replicas: new(int32(3)), Selector: selector, Template: template("web", "sidecar")},
				Status:     appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2},
			},
			want: []interface{}{"web", "2/3", int64(3), int64(2), "26h", "web,sidecar", "web:1,sidecar:1", "app=web"},
		},
		{
			name:    "a deployment without a selector shows an empty selector and unset replicas as the default 1",
			printer: Deployments(),
			obj:     &appsv1.Deployment{ObjectMeta: created},
			want:    []interface{}{"web", "0/1", int64(0), int64(0), "26h", "", "", ""},
		},
		{
			name:    "a replica set shows desired, current and ready",
			printer: ReplicaSets(),
			obj: &appsv1.ReplicaSet{
				ObjectMeta: created,
				Spec:       appsv1.ReplicaSetSpec{Replicas: new(int32(2)), Selector: selector, Template: template("web")},
				Status:     appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1},
			},
			want: []interface{}{"web", int64(2), int64(2), int64(1), "26h", "web", "web:1", "app=web"},
		},
		{
			name:    "a replica set without a selector shows <none>",
			printer: ReplicaSets(),
			obj:     &appsv1.ReplicaSet{ObjectMeta: created, Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(0))}},
			want:    []interface{}{"web", int64(0), int64(0), int64(0), "26h", "", "", "<none>"},
		},
		{
			name:    "a daemon set shows its scheduling counts and node selector",
			printer: DaemonSets(),
			obj: &appsv1.DaemonSet{
				ObjectMeta: created,
				Spec: appsv1.DaemonSetSpec{Selector: selector, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
					Containers:   containers("agent"),
				}}},
				Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 5, CurrentNumberScheduled: 5, NumberReady: 4, UpdatedNumberScheduled: 3, NumberAvailable: 4},
			},
			want: []interface{}{"web", int64(5), int64(5), int64(4), int64(3), int64(4), "kubernetes.io/os=linux", "26h", "agent", "agent:1", "app=web"},
		},
		{
			name:    "a daemon set without a node selector shows <none>",
			printer: DaemonSets(),
			obj:     &appsv1.DaemonSet{ObjectMeta: created, Spec: appsv1.DaemonSetSpec{Selector: selector}},
			want:    []interface{}{"web", int64(0), int64(0), int64(0), int64(0), int64(0), "<none>", "26h", "", "", "app=web"},
		},
		{
			name:    "a stateful set shows ready of desired",
			printer: StatefulSets(),
			obj: &appsv1.StatefulSet{
				ObjectMeta: created,
				Spec:       appsv1.StatefulSetSpec{Replicas: new(int32(3)), Template: template("db")},
				Status:     appsv1.StatefulSetStatus{ReadyReplicas: 3},
			},
			want: []interface{}{"web", "3/3", "26h", "db", "db:1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.printer.Cells(tt.obj, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
