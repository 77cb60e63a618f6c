package static

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
)

// File is the --cloud-config document.
type File struct {
	Instances []Instance `yaml:"instances"`
}

// Instance is one machine.
type Instance struct {
	// Name is the Node name.
	Name string `yaml:"name"`
	// ProviderID defaults to static://<name>.
	ProviderID   string    `yaml:"providerID"`
	Addresses    []Address `yaml:"addresses"`
	Zone         string    `yaml:"zone"`
	Region       string    `yaml:"region"`
	InstanceType string    `yaml:"instanceType"`
	// State is running (default) or stopped.
	State string `yaml:"state"`
	// Labels are extra labels for the Node (labels under kubernetes.io and
	// k8s.io are ignored, as upstream's AdditionalLabels).
	Labels map[string]string `yaml:"labels"`
}

// Address is one node address.
type Address struct {
	Type    corev1.NodeAddressType `yaml:"type"`
	Address string                 `yaml:"address"`
}

// States of an instance.
const (
	StateRunning = "running"
	StateStopped = "stopped"
)

var addressTypes = map[corev1.NodeAddressType]bool{
	corev1.NodeHostName: true, corev1.NodeInternalIP: true, corev1.NodeExternalIP: true,
	corev1.NodeInternalDNS: true, corev1.NodeExternalDNS: true,
}

// Parse decodes and validates a file. Errors name the line and the field.
func Parse(data []byte) (*File, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &File{}, nil // an empty file: no machines
		}
		return nil, err // yaml.v3 errors already say "yaml: line N: ..."
	}
	var f File
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&f); err != nil {
		return nil, err
	}
	lines := instanceLines(&root)
	byID := map[string]int{}
	byName := map[string]int{}
	var errs []error
	for i := range f.Instances {
		in := &f.Instances[i]
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		at := func(field string) string { return fmt.Sprintf("line %d: instances[%d].%s", line, i, field) }
		if in.Name == "" {
			errs = append(errs, fmt.Errorf("%s: required", at("name")))
		}
		if in.ProviderID == "" && in.Name != "" {
			in.ProviderID = ProviderName + "://" + in.Name
		}
		if prev, dup := byID[in.ProviderID]; dup && in.ProviderID != "" {
			errs = append(errs, fmt.Errorf("%s: duplicate provider ID %q (also instances[%d])", at("providerID"), in.ProviderID, prev))
		} else {
			byID[in.ProviderID] = i
		}
		if prev, dup := byName[in.Name]; dup && in.Name != "" {
			errs = append(errs, fmt.Errorf("%s: duplicate name %q (also instances[%d])", at("name"), in.Name, prev))
		} else {
			byName[in.Name] = i
		}
		switch in.State {
		case "":
			in.State = StateRunning
		case StateRunning, StateStopped:
		default:
			errs = append(errs, fmt.Errorf("%s: %q: want %s or %s", at("state"), in.State, StateRunning, StateStopped))
		}
		for j, a := range in.Addresses {
			if !addressTypes[a.Type] {
				errs = append(errs, fmt.Errorf("%s: %q: want Hostname, InternalIP, ExternalIP, InternalDNS or ExternalDNS", at(fmt.Sprintf("addresses[%d].type", j)), a.Type))
			}
			if (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) && net.ParseIP(a.Address) == nil {
				errs = append(errs, fmt.Errorf("%s: %q is not an IP address", at(fmt.Sprintf("addresses[%d].address", j)), a.Address))
			}
			if strings.TrimSpace(a.Address) == "" {
				errs = append(errs, fmt.Errorf("%s: required", at(fmt.Sprintf("addresses[%d].address", j))))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &f, nil
}

// instanceLines returns the line of each element of instances.
func instanceLines(root *yaml.Node) []int {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "instances" && doc.Content[i+1].Kind == yaml.SequenceNode {
			var out []int
			for _, n := range doc.Content[i+1].Content {
				out = append(out, n.Line)
			}
			return out
		}
	}
	return nil
}
