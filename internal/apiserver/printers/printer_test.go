package printers

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// now is the fixed "current time" of every test.
var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// ago is a timestamp d before now.
func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// cell returns the cell under the named column of obj's row.
func cell(t *testing.T, p Printer, obj runtime.Object, column string) interface{} {
	t.Helper()
	cells, err := p.Cells(obj, now)
	if err != nil {
		t.Fatalf("Cells: %v", err)
	}
	if len(cells) != len(p.Columns) {
		t.Fatalf("got %d cells for %d columns", len(cells), len(p.Columns))
	}
	for i, c := range p.Columns {
		if c.Name == column {
			return cells[i]
		}
	}
	t.Fatalf("no column %q", column)
	return nil
}

// headers is what kubectl prints as the header line: column names upper-cased,
// the normal ones and, separately, the -o wide extras.
func headers(p Printer) (normal, wide string) {
	var n, w []string
	for _, c := range p.Columns {
		if c.Priority == 0 {
			n = append(n, strings.ToUpper(c.Name))
		} else {
			w = append(w, strings.ToUpper(c.Name))
		}
	}
	return strings.Join(n, " "), strings.Join(w, " ")
}

func TestHeadersMatchKubectl(t *testing.T) {
	tests := []struct {
		name       string
		printer    Printer
		normal     string
		wide       string
		zero       runtime.Object
		wrongKind  runtime.Object
		nameColumn int
	}{
		{"nodes", Nodes(), "NAME STATUS ROLES AGE VERSION", "INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME", &corev1.Node{}, &corev1.Pod{}, 0},
		{"pods", Pods(), "NAME READY STATUS RESTARTS AGE", "IP NODE NOMINATED NODE READINESS GATES", &corev1.Pod{}, &corev1.Node{}, 0},
		{"namespaces", Namespaces(), "NAME STATUS AGE", "", &corev1.Namespace{}, &corev1.Node{}, 0},
		{"core events", Events(), "LAST SEEN TYPE REASON OBJECT MESSAGE", "SUBOBJECT SOURCE FIRST SEEN COUNT NAME", &corev1.Event{}, &eventsv1.Event{}, 9},
		{"events.k8s.io events", EventsV1(), "LAST SEEN TYPE REASON OBJECT MESSAGE", "SUBOBJECT SOURCE FIRST SEEN COUNT NAME", &eventsv1.Event{}, &corev1.Event{}, 9},
		{"leases", Leases(), "NAME HOLDER AGE", "", &coordinationv1.Lease{}, &corev1.Node{}, 0},
		{"persistent volumes", PersistentVolumes(), "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE", "VOLUMEMODE", &corev1.PersistentVolume{}, &corev1.Node{}, 0},
		{"persistent volume claims", PersistentVolumeClaims(), "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE", "VOLUMEMODE", &corev1.PersistentVolumeClaim{}, &corev1.Node{}, 0},
		{"volume attachments", VolumeAttachments(), "NAME ATTACHER PV NODE ATTACHED AGE", "", &storagev1.VolumeAttachment{}, &corev1.Node{}, 0},
		{"deployments", Deployments(), "NAME READY UP-TO-DATE AVAILABLE AGE", "CONTAINERS IMAGES SELECTOR", &appsv1.Deployment{}, &appsv1.ReplicaSet{}, 0},
		{"replica sets", ReplicaSets(), "NAME DESIRED CURRENT READY AGE", "CONTAINERS IMAGES SELECTOR", &appsv1.ReplicaSet{}, &appsv1.Deployment{}, 0},
		{"daemon sets", DaemonSets(), "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE", "CONTAINERS IMAGES SELECTOR", &appsv1.DaemonSet{}, &appsv1.Deployment{}, 0},
		{"stateful sets", StatefulSets(), "NAME READY AGE", "CONTAINERS IMAGES", &appsv1.StatefulSet{}, &appsv1.Deployment{}, 0},
		{"pod disruption budgets", PodDisruptionBudgets(), "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE", "", &policyv1.PodDisruptionBudget{}, &appsv1.Deployment{}, 0},
		{"the default", Default(), "NAME CREATED AT", "", &corev1.ConfigMap{}, &runtime.Unknown{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			normal, wide := headers(tt.printer)
			if normal != tt.normal {
				t.Errorf("headers: got %q, want %q", normal, tt.normal)
			}
			if wide != tt.wide {
				t.Errorf("wide headers: got %q, want %q", wide, tt.wide)
			}
			if got := tt.printer.Columns[tt.nameColumn]; got.Name != "Name" || got.Format != "name" {
				t.Errorf("column %d: got %q format %q, want the Name column with format name", tt.nameColumn, got.Name, got.Format)
			}
			for _, c := range tt.printer.Columns {
				if c.Description == "" {
					t.Errorf("column %q has no description", c.Name)
				}
			}
			cells, err := tt.printer.Cells(tt.zero, now)
			if err != nil {
				t.Fatalf("Cells of an empty object: %v", err)
			}
			if len(cells) != len(tt.printer.Columns) {
				t.Errorf("got %d cells for %d columns", len(cells), len(tt.printer.Columns))
			}
			if _, err := tt.printer.Cells(tt.wrongKind, now); err == nil {
				t.Errorf("Cells(%T): got no error, want one", tt.wrongKind)
			}
		})
	}
}

func TestToTable(t *testing.T) {
	created := ago(5 * time.Hour)
	list := &corev1.NodeList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next", RemainingItemCount: new(int64(3))},
		Items: []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "40", CreationTimestamp: created, Labels: map[string]string{"zone": "a"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "n2", UID: "u2", ResourceVersion: "41", CreationTimestamp: created}},
		},
	}

	t.Run("a list gives one row per item with list metadata", func(t *testing.T) {
		table, err := Nodes().ToTable(list, now, true)
		if err != nil {
			t.Fatal(err)
		}
		if table.Kind != "Table" || table.APIVersion != "meta.k8s.io/v1" {
			t.Errorf("type: got %s %s, want meta.k8s.io/v1 Table", table.APIVersion, table.Kind)
		}
		if table.ResourceVersion != "42" || table.Continue != "next" || table.RemainingItemCount == nil || *table.RemainingItemCount != 3 {
			t.Errorf("list metadata: got %+v, want resourceVersion 42, continue next, 3 remaining", table.ListMeta)
		}
		if len(table.ColumnDefinitions) != len(Nodes().Columns) {
			t.Errorf("got %d column definitions, want %d", len(table.ColumnDefinitions), len(Nodes().Columns))
		}
		if len(table.Rows) != 2 {
			t.Fatalf("got %d rows, want 2", len(table.Rows))
		}
		for i, row := range table.Rows {
			partial, ok := row.Object.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("row %d object: got %T, want *PartialObjectMetadata", i, row.Object.Object)
			}
			if partial.Kind != "PartialObjectMetadata" || partial.APIVersion != "meta.k8s.io/v1" {
				t.Errorf("row %d object type: got %s %s", i, partial.APIVersion, partial.Kind)
			}
			item := list.Items[i]
			if partial.Name != item.Name || partial.UID != item.UID || partial.ResourceVersion != item.ResourceVersion {
				t.Errorf("row %d metadata: got %s/%s@%s, want %s/%s@%s", i, partial.Name, partial.UID, partial.ResourceVersion, item.Name, item.UID, item.ResourceVersion)
			}
			if row.Cells[0] != item.Name || row.Cells[3] != "5h" {
				t.Errorf("row %d: got name %v age %v, want %s 5h", i, row.Cells[0], row.Cells[3], item.Name)
			}
		}
		if got := table.Rows[0].Object.Object.(*metav1.PartialObjectMetadata).Labels["zone"]; got != "a" {
			t.Errorf("row metadata lost labels: got zone=%q", got)
		}
	})

	t.Run("a single object gives one row and its resource version", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "7", CreationTimestamp: created}}
		table, err := Pods().ToTable(pod, now, true)
		if err != nil {
			t.Fatal(err)
		}
		if table.ResourceVersion != "7" {
			t.Errorf("resourceVersion: got %q, want 7", table.ResourceVersion)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("got %d rows, want 1", len(table.Rows))
		}
		partial := table.Rows[0].Object.Object.(*metav1.PartialObjectMetadata)
		if partial.Namespace != "ns" || partial.Name != "p" {
			t.Errorf("row object: got %s/%s, want ns/p", partial.Namespace, partial.Name)
		}
	})

	t.Run("headers are left out when not wanted", func(t *testing.T) {
		table, err := Nodes().ToTable(list, now, false)
		if err != nil {
			t.Fatal(err)
		}
		if table.ColumnDefinitions != nil {
			t.Errorf("got %d column definitions, want none", len(table.ColumnDefinitions))
		}
		if len(table.Rows) != 2 {
			t.Errorf("got %d rows, want 2", len(table.Rows))
		}
	})

	t.Run("an empty list has an empty, non-nil row list", func(t *testing.T) {
		table, err := Nodes().ToTable(&corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}}, now, true)
		if err != nil {
			t.Fatal(err)
		}
		if table.Rows == nil || len(table.Rows) != 0 || table.ResourceVersion != "9" {
			t.Errorf("got rows %v rv %q, want [] and 9", table.Rows, table.ResourceVersion)
		}
	})

	t.Run("a list of the wrong kind fails", func(t *testing.T) {
		if _, err := Nodes().ToTable(&corev1.PodList{Items: []corev1.Pod{{}}}, now, true); err == nil {
			t.Error("got no error, want one")
		}
	})

	t.Run("finished pods carry a Completed row condition", func(t *testing.T) {
		pods := &corev1.PodList{Items: []corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
			{ObjectMeta: metav1.ObjectMeta{Name: "running"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		}}
		table, err := Pods().ToTable(pods, now, true)
		if err != nil {
			t.Fatal(err)
		}
		if c := table.Rows[0].Conditions; len(c) != 1 || c[0].Type != metav1.RowCompleted || c[0].Reason != "Succeeded" {
			t.Errorf("succeeded pod conditions: got %+v", c)
		}
		if c := table.Rows[1].Conditions; c != nil {
			t.Errorf("running pod conditions: got %+v, want none", c)
		}
	})

	t.Run("the default printer renders unstructured lists", func(t *testing.T) {
		u := &unstructured.UnstructuredList{Object: map[string]interface{}{"metadata": map[string]interface{}{"resourceVersion": "5"}}}
		item := unstructured.Unstructured{}
		item.SetName("thing")
		item.SetNamespace("ns")
		item.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))))
		u.Items = append(u.Items, item)
		table, err := Default().ToTable(u, now, true)
		if err != nil {
			t.Fatal(err)
		}
		if table.ResourceVersion != "5" || len(table.Rows) != 1 {
			t.Fatalf("got rv %q and %d rows, want 5 and 1", table.ResourceVersion, len(table.Rows))
		}
		if got := table.Rows[0].Cells; got[0] != "thing" || got[1] != "2026-01-02T02:04:05Z" {
			t.Errorf("cells: got %v, want [thing 2026-01-02T02:04:05Z]", got)
		}
		if p := table.Rows[0].Object.Object.(*metav1.PartialObjectMetadata); p.Namespace != "ns" {
			t.Errorf("row namespace: got %q, want ns", p.Namespace)
		}
	})
}
