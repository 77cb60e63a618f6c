package scraper

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sample is one cumulative CPU reading (core-seconds) and one memory
// working set (bytes), taken at Time by the agent.
type Sample struct {
	Time   time.Time
	CPU    float64
	Memory int64
}

// PodRef names a pod.
type PodRef struct{ Namespace, Name string }

// Scrape is what one answer of an agent's /metrics/resource holds.
type Scrape struct {
	// Node is nil when the agent could not measure the node.
	Node *Sample
	// Pods maps each pod to its containers' samples by name.
	Pods map[PodRef]map[string]Sample
}

// Parse reads the kubelet's /metrics/resource text format: node_* and
// container_* samples, each with a millisecond timestamp (a sample without
// one gets now). pod_* and any other family are ignored (the pod is the sum
// of its containers). A malformed line is an error naming it.
func Parse(r io.Reader, now time.Time) (Scrape, error) {
	s := Scrape{Pods: map[PodRef]map[string]Sample{}}
	var node Sample
	var nodeCPU, nodeMem bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ts, err := parseLine(line, now)
		if err != nil {
			return Scrape{}, fmt.Errorf("line %d: %w", n, err)
		}
		switch name {
		case "node_cpu_usage_seconds_total":
			node.CPU, node.Time, nodeCPU = value, ts, true
		case "node_memory_working_set_bytes":
			node.Memory, nodeMem = int64(value), true
		case "container_cpu_usage_seconds_total", "container_memory_working_set_bytes":
			ref := PodRef{Namespace: labels["namespace"], Name: labels["pod"]}
			ct := labels["container"]
			if ref.Namespace == "" || ref.Name == "" || ct == "" {
				return Scrape{}, fmt.Errorf("line %d: %s needs the labels namespace, pod and container", n, name)
			}
			if s.Pods[ref] == nil {
				s.Pods[ref] = map[string]Sample{}
			}
			smp := s.Pods[ref][ct]
			if name == "container_cpu_usage_seconds_total" {
				smp.CPU, smp.Time = value, ts
			} else {
				smp.Memory = int64(value)
				if smp.Time.IsZero() {
					smp.Time = ts
				}
			}
			s.Pods[ref][ct] = smp
		}
	}
	if err := sc.Err(); err != nil {
		return Scrape{}, err
	}
	if nodeCPU && nodeMem {
		s.Node = &node
	}
	return s, nil
}

// parseLine splits `name{k="v",...} value [timestamp]`.
func parseLine(line string, now time.Time) (string, map[string]string, float64, time.Time, error) {
	var labels map[string]string
	name, rest := line, ""
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		var err error
		labels, rest, err = parseLabels(rest[1:])
		if err != nil {
			return "", nil, 0, time.Time{}, err
		}
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return "", nil, 0, time.Time{}, fmt.Errorf("want a value and an optional timestamp after %s", name)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return "", nil, 0, time.Time{}, fmt.Errorf("value of %s: %q is not a non-negative number", name, f[0])
	}
	ts := now
	if len(f) == 2 {
		ms, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return "", nil, 0, time.Time{}, fmt.Errorf("timestamp of %s: %q is not an integer", name, f[1])
		}
		ts = time.UnixMilli(ms)
	}
	return name, labels, v, ts, nil
}

// parseLabels reads `k="v",...}` and returns what follows the '}'.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, "", fmt.Errorf("malformed labels near %q", s)
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var val strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			if c == '"' {
				s, closed = s[i+1:], true
				break
			}
			val.WriteByte(c)
		}
		if !closed {
			return nil, "", fmt.Errorf("unterminated value of label %s", key)
		}
		labels[key] = val.String()
	}
}
