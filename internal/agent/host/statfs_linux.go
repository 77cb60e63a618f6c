//go:build linux

package host

import (
	"golang.org/x/sys/unix"
)

func statFS(path string) (fsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsStats{}, err
	}
	return fsStats{
		capacity:   int64(st.Blocks) * st.Bsize,
		available:  int64(st.Bavail) * st.Bsize,
		inodes:     int64(st.Files),
		inodesFree: int64(st.Ffree),
	}, nil
}

func kernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}
