// Package pkgdoc checks that every package under internal/ and cmd/ has a
// doc comment, so a newcomer reading `go doc` finds what each package is for.
package pkgdoc

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// root is the module root, two levels above this package.
const root = "../.."

func TestEveryPackageHasADocComment(t *testing.T) {
	// dirs maps a package directory (relative to root) to whether one of its
	// non-test files carries a package doc comment.
	dirs := map[string]bool{}
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
			f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			dirs[rel] = dirs[rel] || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(dirs) < 10 {
		wd, _ := os.Getwd()
		t.Fatalf("found only %d packages under %s/{internal,cmd} (from %s): is root right?", len(dirs), root, wd)
	}
	var missing []string
	for dir, ok := range dirs {
		if !ok {
			missing = append(missing, filepath.ToSlash(dir))
		}
	}
	sort.Strings(missing)
	for _, dir := range missing {
		t.Errorf("package %s has no doc comment: add a // Package ... comment (a doc.go is a good home)", dir)
	}
}
