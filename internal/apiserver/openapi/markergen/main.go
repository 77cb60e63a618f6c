// Command markergen writes markers_generated.go for the openapi package: the
// required fields and list/map merge markers of the API types, read from the
// Go source of the k8s.io/api and k8s.io/apimachinery versions in go.mod
// (see package gomarkers). Run it with `go generate ./internal/apiserver/openapi`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/nodeplane/nodeplane/internal/apiserver/openapi/gomarkers"
)

func main() {
	out := flag.String("o", "markers_generated.go", "output file")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "markergen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	src, err := gomarkers.Generate()
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
