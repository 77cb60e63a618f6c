package pki

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tokenBytes is the entropy of a generated token; it is written hex-encoded.
const tokenBytes = 32

// EnsureToken returns the bearer token stored in path, first creating the
// file (mode 0600, parent directory 0700 if missing) with a random 32-byte
// hex token if it does not exist. Surrounding whitespace in the file is
// ignored; an empty file is an error. Concurrent callers agree on one token:
// creation never overwrites a file another caller created first.
func EnsureToken(path string) (string, error) {
	token, err := readToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return token, err
	}
	buf := make([]byte, tokenBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate token for %s: %w", path, err)
	}
	token = hex.EncodeToString(buf)
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return "", fmt.Errorf("create directory for token file %s: %w", path, err)
	}
	err = createFileAtomic(path, []byte(token+"\n"), keyMode)
	if errors.Is(err, fs.ErrExist) {
		return readToken(path) // lost a race: use the winner's token
	}
	if err != nil {
		return "", fmt.Errorf("create token file: %w", err)
	}
	return token, nil
}

func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return token, nil
}
