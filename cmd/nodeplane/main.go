// Command nodeplane is the nodeplane binary: API server, node agent, local
// cluster and simulator. All wiring lives in internal/app.
package main

import (
	"context"
	"os"

	"github.com/nodeplane/nodeplane/internal/app"
)

func main() {
	ctx, stop := app.SignalContext(context.Background())
	code := app.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
