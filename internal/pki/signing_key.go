package pki

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// NodeTokenSigningKeyFile holds, in Config.Dir, the key the server signs
// node bearer tokens with (package join). Deleting it and restarting the
// server invalidates every node bearer token issued so far.
const NodeTokenSigningKeyFile = "node-token-signing.key"

// signingKeyBytes is the size of a signing key (HMAC-SHA256 wants at least
// the hash size).
const signingKeyBytes = 32

// NodeTokenSigningKey returns the 32-byte key for signing node bearer
// tokens, kept hex-encoded in NodeTokenSigningKeyFile (mode 0600). The first
// call on a new data directory creates it; concurrent callers agree on one
// key. A file that does not hold exactly 32 hex-encoded bytes is an error,
// not replaced: that would silently invalidate issued tokens.
func (c *Cluster) NodeTokenSigningKey() ([]byte, error) {
	path := filepath.Join(c.dir, NodeTokenSigningKeyFile)
	key, err := readSigningKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key = make([]byte, signingKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate node token signing key: %w", err)
	}
	err = createFileAtomic(path, []byte(hex.EncodeToString(key)+"\n"), keyMode)
	if errors.Is(err, fs.ErrExist) {
		return readSigningKey(path) // lost a race: use the winner's key
	}
	if err != nil {
		return nil, fmt.Errorf("write node token signing key: %w", err)
	}
	return key, nil
}

func readSigningKey(path string) ([]byte, error) {
	data, ok, err := readFileIfExists(path)
	if err != nil {
		return nil, fmt.Errorf("node token signing key: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("node token signing key %s: %w", path, fs.ErrNotExist)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != signingKeyBytes {
		return nil, fmt.Errorf("node token signing key %s is corrupt: want %d hex-encoded bytes (remove it to create a new key, which invalidates every node bearer token)", path, signingKeyBytes)
	}
	if err := restrictKeyMode(path); err != nil {
		return nil, err
	}
	return key, nil
}
