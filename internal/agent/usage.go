package agent

import (
	"errors"
	"net/http"

	"github.com/nodeplane/nodeplane/internal/agent/resourcemetrics"
)

// resourceMetrics builds the /metrics/resource handler: the runtime's pods
// measured from /proc, the node's memory working set as host computes it
// for memory.available.
func (a *Agent) resourceMetrics() (http.Handler, error) {
	return resourcemetrics.New(resourcemetrics.Config{
		Pods: a.cfg.Runtime.Pods,
		NodeMemory: func() (int64, error) {
			s, err := a.cfg.Host.Signals()
			if !s.Memory.Observed() {
				return 0, errors.Join(errors.New("memory.available not observed"), err)
			}
			return s.Memory.Capacity - s.Memory.Available, nil
		},
		Clock:  a.cfg.Clock,
		Logger: a.cfg.Logger,
	})
}
