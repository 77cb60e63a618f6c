// Package structure keeps the shape of the code base mechanically, from the
// package clause, doc comment and imports of every non-test file under
// internal/ and cmd/: the layering (the API's clients — controllers,
// scheduler, agent, simulator, load generator — never reach into the
// server's storage or handlers, the API server never depends on its
// clients, storage depends on nothing above it, only the command tree
// imports command packages) and a doc comment on every package, so that a
// newcomer reading `go doc` finds what each package is for.
package structure

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	root   = "../.."
	module = "github.com/nodeplane/nodeplane/"
)

// rule forbids packages under From (a path prefix relative to the module)
// to import packages under any of To, except the prefixes in Allow.
type rule struct {
	why   string
	from  []string
	to    []string
	allow []string
}

var rules = []rule{
	{
		why:  "controllers, scheduler, agent, simulator and load generator talk to the server only through the API (client-go)",
		from: []string{"internal/controller", "internal/scheduler", "internal/agent", "internal/sim", "internal/loadgen"},
		to:   []string{"internal/storage", "internal/apiserver", "internal/app"},
	},
	{
		why:  "the API server does not depend on its clients or on the command tree",
		from: []string{"internal/apiserver"},
		to:   []string{"internal/controller", "internal/scheduler", "internal/agent", "internal/sim", "internal/loadgen", "internal/app"},
	},
	{
		why:  "storage sits below everything",
		from: []string{"internal/storage"},
		to:   []string{"internal/apiserver", "internal/controller", "internal/scheduler", "internal/agent", "internal/sim", "internal/join", "internal/app"},
	},
	{
		why:   "only cmd/ and the command tree import command packages",
		from:  []string{"internal/"},
		to:    []string{"internal/app"},
		allow: []string{"internal/app"},
	},
}

func TestLayers(t *testing.T) {
	var violations []string
	for pkg, p := range packages(t) {
		for _, r := range rules {
			if !under(pkg, r.from) || under(pkg, r.allow) {
				continue
			}
			for _, dep := range p.imports {
				if under(dep, r.to) {
					violations = append(violations, pkg+" imports "+dep+": "+r.why)
				}
			}
		}
	}
	sort.Strings(violations)
	for _, v := range violations {
		t.Error(v)
	}
}

// TestRulesCatchAViolation makes sure the rules are not vacuous.
func TestRulesCatchAViolation(t *testing.T) {
	tests := []struct {
		name      string
		pkg, dep  string
		forbidden bool
	}{
		{"a controller importing storage is caught", "internal/controller/podgc", "internal/storage/etcd", true},
		{"the agent importing the API server is caught", "internal/agent", "internal/apiserver", true},
		{"the API server importing a controller is caught", "internal/apiserver", "internal/controller/nodelifecycle", true},
		{"a library package importing the command tree is caught", "internal/join", "internal/app/zonesapp", true},
		{"up composing the server and agent commands is allowed", "internal/app/upapp", "internal/app/serverapp", false},
		{"a controller importing the lifecycle labels is allowed", "internal/controller/daemonset", "internal/nodelabels", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := false
			for _, r := range rules {
				if under(tt.pkg, r.from) && !under(tt.pkg, r.allow) && under(tt.dep, r.to) {
					got = true
				}
			}
			if got != tt.forbidden {
				t.Errorf("%s → %s forbidden = %v, want %v", tt.pkg, tt.dep, got, tt.forbidden)
			}
		})
	}
}

// under reports whether pkg is one of prefixes or below one of them.
func under(pkg string, prefixes []string) bool {
	for _, p := range prefixes {
		p = strings.TrimSuffix(p, "/")
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// pkg is what the checks know of one package.
type pkg struct {
	// hasDoc is true when one of its non-test files has a package doc comment.
	hasDoc bool
	// imports are the module-internal packages its non-test files import,
	// relative to the module.
	imports []string
}

// packages maps each package directory under internal/ and cmd/ (relative
// to the module) to what its non-test files say.
func packages(t *testing.T) map[string]*pkg {
	t.Helper()
	out := map[string]*pkg{}
	fset := token.NewFileSet()
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			name := filepath.ToSlash(rel)
			p := out[name]
			if p == nil {
				p = &pkg{}
				out[name] = p
			}
			p.hasDoc = p.hasDoc || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
			for _, imp := range f.Imports {
				path, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					return err
				}
				if dep, ok := strings.CutPrefix(path, module); ok {
					p.imports = append(p.imports, dep)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 10 {
		wd, _ := os.Getwd()
		t.Fatalf("found only %d packages under %s/{internal,cmd} (from %s): is root right?", len(out), root, wd)
	}
	return out
}

func TestEveryPackageHasADocComment(t *testing.T) {
	var missing []string
	for dir, p := range packages(t) {
		if !p.hasDoc {
			missing = append(missing, dir)
		}
	}
	sort.Strings(missing)
	for _, dir := range missing {
		t.Errorf("package %s has no doc comment: add a // Package ... comment (a doc.go is a good home)", dir)
	}
}
