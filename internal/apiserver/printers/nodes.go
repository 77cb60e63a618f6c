package printers

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// nodeRoleLabelPrefix marks a role by key: node-role.kubernetes.io/<role>.
	nodeRoleLabelPrefix = "node-role.kubernetes.io/"
	// nodeRoleLabel marks a role by value: kubernetes.io/role=<role>.
	nodeRoleLabel = "kubernetes.io/role"
)

// Nodes prints nodes: NAME STATUS ROLES AGE VERSION, and with -o wide
// INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.
func Nodes() Printer {
	info := corev1.NodeSystemInfo{}.SwaggerDoc()
	addresses := corev1.NodeStatus{}.SwaggerDoc()["addresses"]
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", "The status of the node"),
			column("Roles", "string", "The roles of the node"),
			ageColumn(),
			column("Version", "string", info["kubeletVersion"]),
			wideColumn("Internal-IP", "string", addresses),
			wideColumn("External-IP", "string", addresses),
			wideColumn("OS-Image", "string", info["osImage"]),
			wideColumn("Kernel-Version", "string", info["kernelVersion"]),
			wideColumn("Container-Runtime", "string", info["containerRuntimeVersion"]),
		},
		Cells: cellsOf(nodeCells),
	}
}

func nodeCells(node *corev1.Node, now time.Time) []interface{} {
	info := node.Status.NodeInfo
	return []interface{}{
		node.Name,
		nodeStatus(node),
		orNone(strings.Join(nodeRoles(node), ",")),
		age(node.CreationTimestamp, now),
		info.KubeletVersion,
		orNone(nodeAddress(node, corev1.NodeInternalIP)),
		orNone(nodeAddress(node, corev1.NodeExternalIP)),
		orUnknown(info.OSImage),
		orUnknown(info.KernelVersion),
		orUnknown(info.ContainerRuntimeVersion),
	}
}

// nodeStatus is "Ready" when the Ready condition is True, "NotReady" when it
// is anything else (False, or Unknown once the node controller has lost the
// kubelet), and "Unknown" when there is no Ready condition at all; followed by
// ",SchedulingDisabled" for a cordoned node.
func nodeStatus(node *corev1.Node) string {
	status := "Unknown"
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		// The last Ready condition wins, as in Kubernetes.
		status = "NotReady"
		if c.Status == corev1.ConditionTrue {
			status = "Ready"
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles lists the node's roles, sorted and without duplicates, from both
// node-role.kubernetes.io/<role> keys and kubernetes.io/role values.
func nodeRoles(node *corev1.Node) []string {
	var roles []string
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, nodeRoleLabelPrefix):
			if role := strings.TrimPrefix(k, nodeRoleLabelPrefix); role != "" {
				roles = append(roles, role)
			}
		case k == nodeRoleLabel && v != "":
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	return slices.Compact(roles)
}

// nodeAddress is the first address of the given type, or "".
func nodeAddress(node *corev1.Node, typ corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == typ {
			return a.Address
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
