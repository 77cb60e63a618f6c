package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

var appsV1 = appsv1.SchemeGroupVersion

// scaleSubresource is the autoscaling/v1 Scale of deployments and replica
// sets, which `kubectl scale` reads and patches.
var scaleSubresource = Subresource{Name: "scale", GVK: autoscalingv1.SchemeGroupVersion.WithKind("Scale"), Verbs: statusVerbs}

// DaemonSetTemplateGenerationAnnotation carries a daemon set's template
// generation, as kube-apiserver keeps it on apps/v1 objects: 1 on create,
// bumped whenever spec.template changes.
const DaemonSetTemplateGenerationAnnotation = "deprecated.daemonset.template.generation"

// Deployments declares apps/v1 deployments (+status, scale). As upstream,
// a change of spec or of the annotations bumps metadata.generation (the
// deployment controller copies annotations to its replica sets), and a
// status write may change neither spec nor labels.
func Deployments() *Resource {
	return &Resource{
		GroupVersion: appsV1, Resource: "deployments", Singular: "deployment", Kind: "Deployment", ListKind: "DeploymentList",
		Namespaced: true,
		ShortNames: []string{"deploy"}, Categories: []string{"all"},
		New:          func() runtime.Object { return &appsv1.Deployment{} },
		NewList:      func() runtime.Object { return &appsv1.DeploymentList{} },
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}, scaleSubresource},
		Scale: &Scale{
			Get: func(obj runtime.Object) (int32, int32, string) {
				d := obj.(*appsv1.Deployment)
				return replicasOf(d.Spec.Replicas), d.Status.Replicas, selectorString(d.Spec.Selector)
			},
			SetReplicas: func(obj runtime.Object, n int32) { obj.(*appsv1.Deployment).Spec.Replicas = &n },
		},
		Printer: printers.Deployments(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) { obj.(*appsv1.Deployment).Status = appsv1.DeploymentStatus{} },
			Default:          func(obj runtime.Object) { defaults.Deployment(obj.(*appsv1.Deployment)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.Deployment).Status = old.(*appsv1.Deployment).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
				d.Spec = o.Spec
				d.Labels = o.Labels
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Deployment(obj.(*appsv1.Deployment)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.DeploymentUpdate(obj.(*appsv1.Deployment), old.(*appsv1.Deployment))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.DeploymentStatusUpdate(obj.(*appsv1.Deployment), old.(*appsv1.Deployment))
			},
			SpecChanged: func(obj, old runtime.Object) bool {
				d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
				return !apiequality.Semantic.DeepEqual(d.Spec, o.Spec) || !apiequality.Semantic.DeepEqual(d.Annotations, o.Annotations)
			},
		},
	}
}

// ReplicaSets declares apps/v1 replica sets (+status, scale), with the
// status.replicas field selector upstream offers.
func ReplicaSets() *Resource {
	return &Resource{
		GroupVersion: appsV1, Resource: "replicasets", Singular: "replicaset", Kind: "ReplicaSet", ListKind: "ReplicaSetList",
		Namespaced: true,
		ShortNames: []string{"rs"}, Categories: []string{"all"},
		New:     func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} },
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(obj.(*appsv1.ReplicaSet).Status.Replicas))}
		},
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}, scaleSubresource},
		Scale: &Scale{
			Get: func(obj runtime.Object) (int32, int32, string) {
				rs := obj.(*appsv1.ReplicaSet)
				return replicasOf(rs.Spec.Replicas), rs.Status.Replicas, selectorString(rs.Spec.Selector)
			},
			SetReplicas: func(obj runtime.Object, n int32) { obj.(*appsv1.ReplicaSet).Spec.Replicas = &n },
		},
		Printer: printers.ReplicaSets(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) { obj.(*appsv1.ReplicaSet).Status = appsv1.ReplicaSetStatus{} },
			Default:          func(obj runtime.Object) { defaults.ReplicaSet(obj.(*appsv1.ReplicaSet)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.ReplicaSet).Status = old.(*appsv1.ReplicaSet).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.ReplicaSet).Spec = old.(*appsv1.ReplicaSet).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.ReplicaSet(obj.(*appsv1.ReplicaSet)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.ReplicaSetUpdate(obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.ReplicaSetStatusUpdate(obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet))
			},
			SpecChanged: func(obj, old runtime.Object) bool {
				return !apiequality.Semantic.DeepEqual(obj.(*appsv1.ReplicaSet).Spec, old.(*appsv1.ReplicaSet).Spec)
			},
		},
	}
}

// DaemonSets declares apps/v1 daemon sets (+status). Besides the
// generation, the server keeps the template generation annotation (see
// DaemonSetTemplateGenerationAnnotation).
func DaemonSets() *Resource {
	return &Resource{
		GroupVersion: appsV1, Resource: "daemonsets", Singular: "daemonset", Kind: "DaemonSet", ListKind: "DaemonSetList",
		Namespaced: true,
		ShortNames: []string{"ds"}, Categories: []string{"all"},
		New:          func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList:      func() runtime.Object { return &appsv1.DaemonSetList{} },
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}},
		Printer:      printers.DaemonSets(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) {
				ds := obj.(*appsv1.DaemonSet)
				ds.Status = appsv1.DaemonSetStatus{}
				metav1.SetMetaDataAnnotation(&ds.ObjectMeta, DaemonSetTemplateGenerationAnnotation, "1")
			},
			Default: func(obj runtime.Object) { defaults.DaemonSet(obj.(*appsv1.DaemonSet)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
				ds.Status = o.Status
				generation := o.Annotations[DaemonSetTemplateGenerationAnnotation]
				if !apiequality.Semantic.DeepEqual(ds.Spec.Template, o.Spec.Template) {
					n, _ := strconv.ParseInt(generation, 10, 64)
					generation = strconv.FormatInt(n+1, 10)
				}
				if generation != "" {
					metav1.SetMetaDataAnnotation(&ds.ObjectMeta, DaemonSetTemplateGenerationAnnotation, generation)
				}
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.DaemonSet).Spec = old.(*appsv1.DaemonSet).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.DaemonSet(obj.(*appsv1.DaemonSet)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.DaemonSetUpdate(obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.DaemonSetStatusUpdate(obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet))
			},
			SpecChanged: func(obj, old runtime.Object) bool {
				return !apiequality.Semantic.DeepEqual(obj.(*appsv1.DaemonSet).Spec, old.(*appsv1.DaemonSet).Spec)
			},
		},
	}
}

// StatefulSets declares apps/v1 stateful sets (+status, scale).
func StatefulSets() *Resource {
	return &Resource{
		GroupVersion: appsV1, Resource: "statefulsets", Singular: "statefulset", Kind: "StatefulSet", ListKind: "StatefulSetList",
		Namespaced: true,
		ShortNames: []string{"sts"}, Categories: []string{"all"},
		New:          func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList:      func() runtime.Object { return &appsv1.StatefulSetList{} },
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}, scaleSubresource},
		Scale: &Scale{
			Get: func(obj runtime.Object) (int32, int32, string) {
				ss := obj.(*appsv1.StatefulSet)
				return replicasOf(ss.Spec.Replicas), ss.Status.Replicas, selectorString(ss.Spec.Selector)
			},
			SetReplicas: func(obj runtime.Object, n int32) { obj.(*appsv1.StatefulSet).Spec.Replicas = &n },
		},
		Printer: printers.StatefulSets(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) { obj.(*appsv1.StatefulSet).Status = appsv1.StatefulSetStatus{} },
			Default:          func(obj runtime.Object) { defaults.StatefulSet(obj.(*appsv1.StatefulSet)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.StatefulSet).Status = old.(*appsv1.StatefulSet).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.StatefulSet).Spec = old.(*appsv1.StatefulSet).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.StatefulSet(obj.(*appsv1.StatefulSet)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.StatefulSetUpdate(obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.StatefulSetStatusUpdate(obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet))
			},
			SpecChanged: func(obj, old runtime.Object) bool {
				return !apiequality.Semantic.DeepEqual(obj.(*appsv1.StatefulSet).Spec, old.(*appsv1.StatefulSet).Spec)
			},
		},
	}
}

// ControllerRevisions declares apps/v1 controller revisions: immutable
// snapshots (data) that a StatefulSet's controller numbers by revision.
func ControllerRevisions() *Resource {
	return &Resource{
		GroupVersion: appsV1, Resource: "controllerrevisions", Singular: "controllerrevision", Kind: "ControllerRevision", ListKind: "ControllerRevisionList",
		Namespaced: true,
		New:        func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:    func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Printer:    printers.ControllerRevisions(),
		Strategy: Strategy{
			Validate: func(obj runtime.Object) field.ErrorList {
				return validation.ControllerRevision(obj.(*appsv1.ControllerRevision))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.ControllerRevisionUpdate(obj.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision))
			},
		},
	}
}

// replicasOf reads a defaulted spec.replicas (nil only before defaulting:
// the default, 1).
func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// selectorString renders a label selector as a Scale's status.selector;
// an invalid one (refused by validation) renders empty.
func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	return s.String()
}
