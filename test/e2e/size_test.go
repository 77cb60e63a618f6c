package e2e

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// binaryBudget is the most a stripped (-s -w) linux binary may weigh, per
// architecture. docs/install.md ("Binary sizes") records the measured sizes:
// 50.0 MiB (amd64) and 46.6 MiB (arm64) on 2026-11-26; the budget leaves
// about 10 % for growth. A jump of tens of MiB usually means something linked
// a function that calls reflect's Method/MethodByName with a computed
// argument (text/template, html/template, go-cmp), which makes the linker
// keep every exported method of every type.
var binaryBudget = map[elf.Machine]int64{
	elf.EM_X86_64:  55 << 20,
	elf.EM_AARCH64: 51 << 20,
}

// TestBinarySizeBudget fails if the binary `make release` builds (static,
// stripped, release tags, the stand-ins of release/_overlay) for this
// machine's architecture outgrows its budget. It weighs the binary the
// harness built with scripts/release-build.sh; NODEPLANE_RELEASE_BIN checks
// an existing release binary instead (`make size-check` passes each dist/
// binary), and with only NODEPLANE_BIN set it builds one.
func TestBinarySizeBudget(t *testing.T) {
	bin := os.Getenv("NODEPLANE_RELEASE_BIN")
	switch {
	case bin != "":
	case releaseBuilt:
		bin = binary
	default:
		if runtime.GOOS != "linux" {
			t.Skipf("release binaries are linux binaries; this is %s", runtime.GOOS)
		}
		bin = filepath.Join(t.TempDir(), "nodeplane")
		if out, err := exec.Command("../../scripts/release-build.sh", bin).CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	size, machine, err := elfSize(bin)
	if err != nil {
		t.Fatal(err)
	}
	budget, ok := binaryBudget[machine]
	if !ok {
		t.Fatalf("%s: no size budget for ELF machine %v", bin, machine)
	}
	t.Logf("%s (%v): %d bytes (%.1f MiB), budget %.1f MiB", bin, machine, size, mib(size), mib(budget))
	if size > budget {
		t.Errorf("%s is %.1f MiB, over its budget of %.1f MiB: see docs/install.md, binary sizes, for how to find what grew", bin, mib(size), mib(budget))
	}
}

func elfSize(path string) (int64, elf.Machine, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("%s is not an ELF binary: %w", path, err)
	}
	defer f.Close()
	return fi.Size(), f.Machine, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
