// Command nodelist times LISTs of all Nodes over protobuf with client-go:
// paginated (-limit per page, following continue tokens) and in one
// response (limit 0). It prints the wall time, pages and items of each;
// scripts/zonebench.sh samples the server's CPU around it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig")
	limit := flag.Int64("limit", 500, "page size of the paginated LIST (0: only the full LIST)")
	mode := flag.String("mode", "paged", "paged or full")
	flag.Parse()
	if err := run(*kubeconfig, *mode, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "nodelist:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, mode string, limit int64) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	rc.QPS, rc.Burst = 1000, 1000
	rc.Timeout = 5 * time.Minute
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if mode == "full" {
		limit = 0
	} else if mode != "paged" || limit <= 0 {
		return fmt.Errorf("-mode %q -limit %d: want paged with a positive limit, or full", mode, limit)
	}
	ctx := context.Background()
	start := time.Now()
	items, pages, cont := 0, 0, ""
	for {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			return fmt.Errorf("page %d: %w", pages+1, err)
		}
		items += len(list.Items)
		pages++
		if cont = list.Continue; cont == "" {
			break
		}
	}
	fmt.Printf("%s list: %d nodes in %d page(s), %v\n", mode, items, pages, time.Since(start).Round(time.Millisecond))
	return nil
}
