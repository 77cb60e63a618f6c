package defaults

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Deployment applies kube's apps/v1 Deployment defaults: replicas 1,
// strategy RollingUpdate with maxUnavailable and maxSurge 25%,
// revisionHistoryLimit 10, progressDeadlineSeconds 600, and the pod
// template defaults.
func Deployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = int32Ptr(1)
	}
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromString("25%")
			s.RollingUpdate.MaxUnavailable = &v
		}
		if s.RollingUpdate.MaxSurge == nil {
			v := intstr.FromString("25%")
			s.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = int32Ptr(10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = int32Ptr(600)
	}
	PodSpec(&d.Spec.Template.Spec)
}

// ReplicaSet applies kube's apps/v1 ReplicaSet defaults: replicas 1 and the
// pod template defaults.
func ReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = int32Ptr(1)
	}
	PodSpec(&rs.Spec.Template.Spec)
}

// DaemonSet applies kube's apps/v1 DaemonSet defaults: update strategy
// RollingUpdate with maxUnavailable 1 and maxSurge 0,
// revisionHistoryLimit 10, and the pod template defaults.
func DaemonSet(ds *appsv1.DaemonSet) {
	s := &ds.Spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if s.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromInt32(1)
			s.RollingUpdate.MaxUnavailable = &v
		}
		if s.RollingUpdate.MaxSurge == nil {
			v := intstr.FromInt32(0)
			s.RollingUpdate.MaxSurge = &v
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = int32Ptr(10)
	}
	PodSpec(&ds.Spec.Template.Spec)
}

func int32Ptr(v int32) *int32 { return &v }

// StatefulSet applies kube's apps/v1 StatefulSet defaults: replicas 1,
// podManagementPolicy OrderedReady, update strategy RollingUpdate with
// partition 0, revisionHistoryLimit 10, claim retention Retain/Retain, the
// pod template defaults and the claim template defaults.
func StatefulSet(ss *appsv1.StatefulSet) {
	if ss.Spec.Replicas == nil {
		ss.Spec.Replicas = int32Ptr(1)
	}
	if ss.Spec.PodManagementPolicy == "" {
		ss.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	s := &ss.Spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.RollingUpdate.Partition == nil {
			s.RollingUpdate.Partition = int32Ptr(0)
		}
	}
	if ss.Spec.RevisionHistoryLimit == nil {
		ss.Spec.RevisionHistoryLimit = int32Ptr(10)
	}
	p := ss.Spec.PersistentVolumeClaimRetentionPolicy
	if p == nil {
		p = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
		ss.Spec.PersistentVolumeClaimRetentionPolicy = p
	}
	if p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	PodSpec(&ss.Spec.Template.Spec)
	for i := range ss.Spec.VolumeClaimTemplates {
		pvcSpec(&ss.Spec.VolumeClaimTemplates[i].Spec)
	}
}
