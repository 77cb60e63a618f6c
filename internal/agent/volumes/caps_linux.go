package volumes

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// capSysAdmin is CAP_SYS_ADMIN's bit in the capability sets.
const capSysAdmin = 21

// HasCapSysAdmin reports whether this process has CAP_SYS_ADMIN in its
// effective set (what mount(2) and unshare(CLONE_NEWNS) need).
func HasCapSysAdmin() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			return err == nil && caps&(1<<capSysAdmin) != 0
		}
	}
	return false
}

// mountTmpfs mounts a tmpfs at p unless one is there already.
func mountTmpfs(p string) error {
	var st, parent syscall.Statfs_t
	if syscall.Statfs(p, &st) == nil && st.Type == tmpfsMagic {
		if syscall.Statfs(p+"/..", &parent) == nil && parent.Fsid != st.Fsid {
			return nil
		}
	}
	return syscall.Mount("tmpfs", p, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0777")
}

// tmpfsMagic is TMPFS_MAGIC.
const tmpfsMagic = 0x01021994

// unmountIfMounted detaches whatever is mounted at p (a Memory emptyDir).
func unmountIfMounted(p string) {
	for syscall.Unmount(p, syscall.MNT_DETACH) == nil {
	}
}
