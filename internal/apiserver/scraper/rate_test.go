package scraper

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestRates(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(d time.Duration, cpu float64, mem int64) Sample {
		return Sample{Time: t0.Add(d), CPU: cpu, Memory: mem}
	}
	pod := PodRef{Namespace: "default", Name: "p"}
	for _, c := range []struct {
		name      string
		prev, cur Scrape
		wantNode  *float64 // cores
		wantPod   map[string]float64
	}{
		{
			name:     "two samples 10 s apart give the CPU used in between per second",
			prev:     Scrape{Node: ptr(at(0, 100, 1)), Pods: map[PodRef]map[string]Sample{pod: {"a": at(0, 1, 5), "b": at(0, 2, 5)}}},
			cur:      Scrape{Node: ptr(at(10*time.Second, 115, 2)), Pods: map[PodRef]map[string]Sample{pod: {"a": at(10*time.Second, 6, 7), "b": at(10*time.Second, 2, 5)}}},
			wantNode: fptr(1.5),
			wantPod:  map[string]float64{"a": 0.5, "b": 0},
		},
		{
			name:    "a counter that went back (a restarted container) gives no pod usage",
			prev:    Scrape{Pods: map[PodRef]map[string]Sample{pod: {"a": at(0, 10, 1)}}},
			cur:     Scrape{Pods: map[PodRef]map[string]Sample{pod: {"a": at(time.Second, 1, 1)}}},
			wantPod: nil,
		},
		{
			name:    "a container new since the last scrape leaves its pod out until the next",
			prev:    Scrape{Pods: map[PodRef]map[string]Sample{pod: {"a": at(0, 1, 1)}}},
			cur:     Scrape{Pods: map[PodRef]map[string]Sample{pod: {"a": at(time.Second, 2, 1), "b": at(time.Second, 0, 1)}}},
			wantPod: nil,
		},
		{
			name:     "samples with the same timestamp give nothing",
			prev:     Scrape{Node: ptr(at(0, 1, 1))},
			cur:      Scrape{Node: ptr(at(0, 2, 1))},
			wantNode: nil,
		},
		{
			name:     "a node not measured in one scrape has no usage",
			prev:     Scrape{},
			cur:      Scrape{Node: ptr(at(time.Second, 2, 1))},
			wantNode: nil,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			node, pods := Rates(c.prev, c.cur)
			switch {
			case c.wantNode == nil && node != nil:
				t.Errorf("node usage %+v, want none", *node)
			case c.wantNode != nil && node == nil:
				t.Errorf("no node usage, want %v cores", *c.wantNode)
			case c.wantNode != nil && math.Abs(node.CPU-*c.wantNode) > 1e-9:
				t.Errorf("node CPU %v, want %v", node.CPU, *c.wantNode)
			case node != nil && (node.Window != c.cur.Node.Time.Sub(c.prev.Node.Time) || !node.Timestamp.Equal(c.cur.Node.Time) || node.Memory != c.cur.Node.Memory):
				t.Errorf("node usage %+v: want the window between the samples, the later timestamp and the later memory", *node)
			}
			pu, ok := pods[pod]
			if c.wantPod == nil {
				if ok {
					t.Errorf("pod usage %+v, want none", pu)
				}
				return
			}
			if !ok || len(pu.Containers) != len(c.wantPod) {
				t.Fatalf("pod usage %+v, want containers %v", pu, c.wantPod)
			}
			for _, ct := range pu.Containers {
				if math.Abs(ct.CPU-c.wantPod[ct.Name]) > 1e-9 {
					t.Errorf("container %s CPU %v, want %v", ct.Name, ct.CPU, c.wantPod[ct.Name])
				}
				if ct.Memory != c.cur.Pods[pod][ct.Name].Memory {
					t.Errorf("container %s memory %d, want the later sample's", ct.Name, ct.Memory)
				}
			}
		})
	}
}

func TestParse(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, c := range []struct {
		name, text string
		wantErr    string
		check      func(t *testing.T, s Scrape)
	}{
		{
			name: "the kubelet's format gives node and container samples with their timestamps",
			text: `# HELP node_cpu_usage_seconds_total x
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 12.5 1700000001000
node_memory_working_set_bytes 1.048576e+06 1700000001000
container_cpu_usage_seconds_total{container="main",namespace="default",pod="we\"ird"} 3 1700000002000
container_memory_working_set_bytes{container="main",namespace="default",pod="we\"ird"} 4096 1700000002000
pod_cpu_usage_seconds_total{namespace="default",pod="we\"ird"} 3 1700000002000
scrape_error 0 1700000001000
`,
			check: func(t *testing.T, s Scrape) {
				if s.Node == nil || s.Node.CPU != 12.5 || s.Node.Memory != 1<<20 || !s.Node.Time.Equal(time.UnixMilli(1700000001000)) {
					t.Errorf("node %+v", s.Node)
				}
				c := s.Pods[PodRef{"default", `we"ird`}]["main"]
				if c.CPU != 3 || c.Memory != 4096 || !c.Time.Equal(time.UnixMilli(1700000002000)) {
					t.Errorf("container %+v (pods %v)", c, s.Pods)
				}
			},
		},
		{
			name: "a sample without a timestamp is taken now",
			text: "node_cpu_usage_seconds_total 1\nnode_memory_working_set_bytes 2\n",
			check: func(t *testing.T, s Scrape) {
				if s.Node == nil || !s.Node.Time.Equal(now) {
					t.Errorf("node %+v, want time %v", s.Node, now)
				}
			},
		},
		{
			name: "a node with only CPU is not measured",
			text: "node_cpu_usage_seconds_total 1\n",
			check: func(t *testing.T, s Scrape) {
				if s.Node != nil {
					t.Errorf("node %+v, want nil", s.Node)
				}
			},
		},
		{name: "a negative value is an error", text: "node_cpu_usage_seconds_total -1\n", wantErr: "line 1: value of node_cpu_usage_seconds_total"},
		{name: "an unterminated label is an error", text: `container_cpu_usage_seconds_total{container="a 1` + "\n", wantErr: "unterminated value of label container"},
		{name: "a container sample without its pod is an error", text: `container_cpu_usage_seconds_total{container="a"} 1` + "\n", wantErr: "needs the labels namespace, pod and container"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(strings.NewReader(c.text), now)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, s)
		})
	}
}

func ptr(s Sample) *Sample    { return &s }
func fptr(f float64) *float64 { return &f }
