package manager_test

import (
	"slices"
	"testing"

	"github.com/nodeplane/nodeplane/internal/controller/cloudnode"
	"github.com/nodeplane/nodeplane/internal/controller/cloudnodelifecycle"
	"github.com/nodeplane/nodeplane/internal/controller/clusterroleaggregation"
	"github.com/nodeplane/nodeplane/internal/controller/daemonset"
	"github.com/nodeplane/nodeplane/internal/controller/deployment"
	"github.com/nodeplane/nodeplane/internal/controller/disruption"
	"github.com/nodeplane/nodeplane/internal/controller/garbagecollector"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/namespace"
	"github.com/nodeplane/nodeplane/internal/controller/nodeipam"
	"github.com/nodeplane/nodeplane/internal/controller/nodelifecycle"
	"github.com/nodeplane/nodeplane/internal/controller/podgc"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
	"github.com/nodeplane/nodeplane/internal/controller/statefulset"
	"github.com/nodeplane/nodeplane/internal/controller/tainteviction"
	"github.com/nodeplane/nodeplane/internal/controller/volume/attachdetach"
	"github.com/nodeplane/nodeplane/internal/controller/volume/persistentvolume"
	"github.com/nodeplane/nodeplane/internal/controller/volume/pvcprotection"
	"github.com/nodeplane/nodeplane/internal/controller/volume/pvprotection"
	"github.com/nodeplane/nodeplane/internal/scheduler"
)

// TestKnownIsExactlyTheBuiltControllers ties Known to the names the
// controller packages declare: a controller added without its name in Known
// could not be enabled, and a name in Known without a controller would be
// accepted and do nothing. (internal/app/serverapp/controllers.go builds
// one controller per name.)
func TestKnownIsExactlyTheBuiltControllers(t *testing.T) {
	built := []string{
		nodelifecycle.ControllerName, tainteviction.ControllerName, podgc.ControllerName,
		garbagecollector.ControllerName, replicaset.ControllerName, deployment.ControllerName,
		daemonset.ControllerName, disruption.ControllerName, namespace.ControllerName, statefulset.ControllerName, scheduler.Name,
		persistentvolume.ControllerName, attachdetach.ControllerName, clusterroleaggregation.ControllerName,
		cloudnode.ControllerName, cloudnodelifecycle.ControllerName,
		nodeipam.ControllerName,
		pvcprotection.ControllerName, pvprotection.ControllerName,
	}
	for _, name := range built {
		if !slices.Contains(manager.Known, name) {
			t.Errorf("controller %q is built but not in manager.Known", name)
		}
	}
	for _, name := range manager.Known {
		if !slices.Contains(built, name) {
			t.Errorf("manager.Known lists %q, which no controller package declares", name)
		}
	}
}
