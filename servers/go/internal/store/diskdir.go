package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openStoreDirs creates dir, dir/tmp and dir/files as needed and opens the
// two subdirectories, refusing a symlink, a non-directory or a directory
// another user owns: whoever controls them could redirect the store's
// writes and start-up deletions (PROTOCOL.md "The disk store's directory").
func openStoreDirs(dir string) (tmp, files int, err error) {
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return -1, -1, err
	}
	top, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(top) }() // only the subdirectories are kept
	if tmp, err = openSubdir(top, dir, tmpDir); err != nil {
		return -1, -1, err
	}
	if files, err = openSubdir(top, dir, filesDir); err != nil {
		_ = unix.Close(tmp) // failing start-up
		return -1, -1, err
	}
	return tmp, files, nil
}

func openSubdir(top int, dir, sub string) (int, error) {
	path := filepath.Join(dir, sub)
	if err := unix.Mkdirat(top, sub, dirPerm); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("creating %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(top, sub, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkDir(path, &st); err != nil {
		return -1, err
	}
	fd, err := unix.Openat(top, sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening %s: %w", path, err)
	}
	// Check the opened directory too: the name may have changed in between.
	if err := unix.Fstat(fd, &st); err == nil {
		err = checkDir(path, &st)
	}
	if err != nil {
		_ = unix.Close(fd) // refused
		return -1, err
	}
	return fd, nil
}

func checkDir(path string, st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s is a symlink; refusing to use it", path)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d)", path, st.Uid, os.Geteuid())
	}
	return nil
}

// cleanTmp removes the regular files directly in tmp, left by uploads that
// never committed; nothing else (no recursion, no symlinks followed).
func cleanTmp(tmp int) error {
	fd, err := unix.Openat(tmp, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), tmpDir)
	defer func() { _ = d.Close() }() // read-only listing
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(tmp, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if err := unix.Unlinkat(tmp, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}
