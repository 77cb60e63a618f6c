package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Deployments prints deployments: NAME READY UP-TO-DATE AVAILABLE AGE, and with
// -o wide CONTAINERS IMAGES SELECTOR.
func Deployments() Printer {
	status := appsv1.DeploymentStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", "Number of the pod with ready state"),
			column("Up-to-date", "string", status["updatedReplicas"]),
			column("Available", "string", status["availableReplicas"]),
			ageColumn(),
			wideColumn("Containers", "string", containersDoc),
			wideColumn("Images", "string", imagesDoc),
			wideColumn("Selector", "string", appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
		},
		Cells: cellsOf(func(d *appsv1.Deployment, now time.Time) []interface{} {
			names, images := containerCells(d.Spec.Template.Spec.Containers)
			selector := "<invalid>"
			if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
				selector = s.String()
			}
			return []interface{}{
				d.Name,
				fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
				int64(d.Status.UpdatedReplicas),
				int64(d.Status.AvailableReplicas),
				age(d.CreationTimestamp, now),
				names,
				images,
				selector,
			}
		}),
	}
}

// ReplicaSets prints replica sets: NAME DESIRED CURRENT READY AGE, and with -o
// wide CONTAINERS IMAGES SELECTOR.
func ReplicaSets() Printer {
	status := appsv1.ReplicaSetStatus{}.SwaggerDoc()
	spec := appsv1.ReplicaSetSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Desired", "integer", spec["replicas"]),
			column("Current", "integer", status["replicas"]),
			column("Ready", "integer", status["readyReplicas"]),
			ageColumn(),
			wideColumn("Containers", "string", containersDoc),
			wideColumn("Images", "string", imagesDoc),
			wideColumn("Selector", "string", spec["selector"]),
		},
		Cells: cellsOf(func(rs *appsv1.ReplicaSet, now time.Time) []interface{} {
			names, images := containerCells(rs.Spec.Template.Spec.Containers)
			return []interface{}{
				rs.Name,
				int64(replicas(rs.Spec.Replicas)),
				int64(rs.Status.Replicas),
				int64(rs.Status.ReadyReplicas),
				age(rs.CreationTimestamp, now),
				names,
				images,
				metav1.FormatLabelSelector(rs.Spec.Selector),
			}
		}),
	}
}

// DaemonSets prints daemon sets: NAME DESIRED CURRENT READY UP-TO-DATE
// AVAILABLE NODE SELECTOR AGE, and with -o wide CONTAINERS IMAGES SELECTOR.
func DaemonSets() Printer {
	status := appsv1.DaemonSetStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Desired", "integer", status["desiredNumberScheduled"]),
			column("Current", "integer", status["currentNumberScheduled"]),
			column("Ready", "integer", status["numberReady"]),
			column("Up-to-date", "integer", status["updatedNumberScheduled"]),
			column("Available", "integer", status["numberAvailable"]),
			column("Node Selector", "string", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
			ageColumn(),
			wideColumn("Containers", "string", containersDoc),
			wideColumn("Images", "string", imagesDoc),
			wideColumn("Selector", "string", appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
		},
		Cells: cellsOf(func(ds *appsv1.DaemonSet, now time.Time) []interface{} {
			names, images := containerCells(ds.Spec.Template.Spec.Containers)
			return []interface{}{
				ds.Name,
				int64(ds.Status.DesiredNumberScheduled),
				int64(ds.Status.CurrentNumberScheduled),
				int64(ds.Status.NumberReady),
				int64(ds.Status.UpdatedNumberScheduled),
				int64(ds.Status.NumberAvailable),
				labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
				age(ds.CreationTimestamp, now),
				names,
				images,
				metav1.FormatLabelSelector(ds.Spec.Selector),
			}
		}),
	}
}

// StatefulSets prints stateful sets: NAME READY AGE, and with -o wide
// CONTAINERS IMAGES.
func StatefulSets() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", "Number of the pod with ready state"),
			ageColumn(),
			wideColumn("Containers", "string", containersDoc),
			wideColumn("Images", "string", imagesDoc),
		},
		Cells: cellsOf(func(ss *appsv1.StatefulSet, now time.Time) []interface{} {
			names, images := containerCells(ss.Spec.Template.Spec.Containers)
			return []interface{}{
				ss.Name,
				fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, replicas(ss.Spec.Replicas)),
				age(ss.CreationTimestamp, now),
				names,
				images,
			}
		}),
	}
}

// ControllerRevisions prints controller revisions: NAME CONTROLLER
// REVISION AGE, as kubectl.
func ControllerRevisions() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Controller", "string", "Controller of the object"),
			column("Revision", "integer", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
			ageColumn(),
		},
		Cells: cellsOf(func(cr *appsv1.ControllerRevision, now time.Time) []interface{} {
			controller := "<none>"
			if ref := metav1.GetControllerOf(cr); ref != nil {
				controller = strings.ToLower(ref.Kind) + "." + strings.Split(ref.APIVersion, "/")[0] + "/" + ref.Name
				if !strings.Contains(ref.APIVersion, "/") {
					controller = strings.ToLower(ref.Kind) + "/" + ref.Name
				}
			}
			return []interface{}{cr.Name, controller, cr.Revision, age(cr.CreationTimestamp, now)}
		}),
	}
}

const (
	containersDoc = "Names of each container in the template."
	imagesDoc     = "Images referenced by each container in the template."
)

// containerCells joins the template's container names and images with commas.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	i := make([]string, len(containers))
	for k, c := range containers {
		n[k], i[k] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(i, ",")
}

// replicas reads a spec.replicas field. The API server defaults it to 1, so
// an unset value only reaches us from an undefaulted object; show the default
// rather than 0.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}
