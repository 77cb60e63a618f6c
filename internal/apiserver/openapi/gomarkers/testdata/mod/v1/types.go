package v1

// Meta stands in for ObjectMeta.
type Meta struct {
	Name string `json:"name,omitempty"`
}

// Inline is embedded without a JSON name.
type Inline struct {
	Kind string `json:"kind"`
}

// Thing has one field per rule.
// +structType=atomic
type Thing struct {
	Inline `json:",inline"`
	Meta   `json:"metadata"`

	Plain   string `json:"plain"`
	Omitted string `json:"omitted,omitempty"`
	Zero    string `json:"zero,omitzero"`
	// +optional
	Marked string `json:"marked"`
	// +required
	Forced string `json:"forced,omitempty"`
	// +k8s:required
	Declared string `json:"declared,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +listMapKey=port
	// +optional
	Ports []string `json:"ports,omitempty"`
	// +mapType=atomic
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	Hidden string            `json:"-"`
	lower  string
}

// Empty has nothing to say.
type Empty struct {
	A string `json:"a,omitempty"`
}
