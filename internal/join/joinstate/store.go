// Package joinstate keeps the join server's state in the cluster's store,
// where every API server sharing the etcd cluster sees it: the join tokens
// (only a hash of their secret part is stored) and the certificate last
// issued to each node. It serves the administrators' endpoint behind
// `nodeplane token` (Handler) and reads Nodes and Leases through the API
// for the join server's takeover check (APINodes).
//
// It implements the interfaces package join consumes (join.TokenStore,
// join.IdentityStore, join.NodeReader); it does not decide who may join.
// Its keys live under /nodeplane/join/, outside the API's /registry/, so
// no API request can read them.
package joinstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// Key prefixes in the store.
const (
	tokensPrefix     = "/nodeplane/join/tokens/"
	identitiesPrefix = "/nodeplane/join/identities/"
)

// Config configures a Store.
type Config struct {
	// Storage is the cluster's main store. Required.
	Storage storage.Interface
	// CAPEM is the cluster CA, which each new token's cluster-info MAC
	// covers. Required.
	CAPEM []byte
	// Clock stamps and expires tokens. Nil means the real clock.
	Clock clock.PassiveClock
}

// Store keeps join tokens and issued identities. Safe for concurrent use.
type Store struct {
	st    storage.Interface
	caPEM []byte
	clock clock.PassiveClock
}

var (
	_ join.TokenStore    = (*Store)(nil)
	_ join.IdentityStore = (*Store)(nil)
)

// New returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Storage == nil {
		return nil, errors.New("join state: Storage is required")
	}
	if len(cfg.CAPEM) == 0 {
		return nil, errors.New("join state: CAPEM is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Store{st: cfg.Storage, caPEM: cfg.CAPEM, clock: cfg.Clock}, nil
}

// maxCreateAttempts bounds retries on (unlikely) id collisions.
const maxCreateAttempts = 5

// CreateToken makes and stores a new join token that expires after ttl
// (zero: never) and returns it. This is the only time the secret exists
// outside the caller.
func (s *Store) CreateToken(ctx context.Context, ttl time.Duration, description string) (string, join.TokenRecord, error) {
	if ttl < 0 {
		return "", join.TokenRecord{}, fmt.Errorf("negative ttl %s", ttl)
	}
	now := s.clock.Now().UTC().Truncate(time.Second)
	var expires *time.Time
	if ttl > 0 {
		e := s.clock.Now().Add(ttl).UTC()
		expires = &e
	}
	for range maxCreateAttempts {
		token, rec, err := join.NewTokenRecord(s.caPEM, now, expires, description)
		if err != nil {
			return "", join.TokenRecord{}, err
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return "", join.TokenRecord{}, fmt.Errorf("encode join token: %w", err)
		}
		_, err = s.st.Create(ctx, tokensPrefix+rec.ID, data)
		if errors.Is(err, storage.ErrAlreadyExists) {
			continue
		}
		if err != nil {
			return "", join.TokenRecord{}, fmt.Errorf("store join token: %w", err)
		}
		return token, rec, nil
	}
	return "", join.TokenRecord{}, errors.New("store join token: no free id after several attempts")
}

// Token returns the token with id (join.ErrTokenNotFound if none).
func (s *Store) Token(ctx context.Context, id string) (join.TokenRecord, error) {
	kv, err := s.st.Get(ctx, tokensPrefix+id)
	if errors.Is(err, storage.ErrNotFound) {
		return join.TokenRecord{}, fmt.Errorf("%w: %s", join.ErrTokenNotFound, id)
	}
	if err != nil {
		return join.TokenRecord{}, fmt.Errorf("read join token %s: %w", id, err)
	}
	return decodeToken(kv)
}

// Tokens returns every stored token in id order.
func (s *Store) Tokens(ctx context.Context) ([]join.TokenRecord, error) {
	var out []join.TokenRecord
	opts := storage.ListOptions{}
	for {
		res, err := s.st.List(ctx, tokensPrefix, opts)
		if err != nil {
			return nil, fmt.Errorf("list join tokens: %w", err)
		}
		for _, kv := range res.Items {
			rec, err := decodeToken(kv)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
		if !res.More || len(res.Items) == 0 {
			return out, nil
		}
		opts = storage.ListOptions{Revision: res.Revision, StartKey: res.Items[len(res.Items)-1].Key + "\x00"}
	}
}

// DeleteToken deletes the token with id (join.ErrTokenNotFound if none).
// Joins with it are refused from then on, like joins with a wrong token.
func (s *Store) DeleteToken(ctx context.Context, id string) error {
	_, _, err := s.st.Delete(ctx, tokensPrefix+id, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: %s", join.ErrTokenNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("delete join token %s: %w", id, err)
	}
	return nil
}

func decodeToken(kv storage.KeyValue) (join.TokenRecord, error) {
	var rec join.TokenRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return join.TokenRecord{}, fmt.Errorf("decode join token %s: %w", kv.Key, err)
	}
	return rec, nil
}

// Identity returns the identity recorded for node and its version.
func (s *Store) Identity(ctx context.Context, node string) (join.IssuedIdentity, int64, error) {
	kv, err := s.st.Get(ctx, identitiesPrefix+node)
	if errors.Is(err, storage.ErrNotFound) {
		return join.IssuedIdentity{}, 0, fmt.Errorf("%w: %s", join.ErrIdentityNotFound, node)
	}
	if err != nil {
		return join.IssuedIdentity{}, 0, fmt.Errorf("read identity of node %s: %w", node, err)
	}
	var id join.IssuedIdentity
	if err := json.Unmarshal(kv.Value, &id); err != nil {
		return join.IssuedIdentity{}, 0, fmt.Errorf("decode identity of node %s: %w", node, err)
	}
	return id, kv.ModRevision, nil
}

// PutIdentity records id, replacing the record at version (0: there must
// be none).
func (s *Store) PutIdentity(ctx context.Context, id join.IssuedIdentity, version int64) error {
	data, err := json.Marshal(id)
	if err != nil {
		return fmt.Errorf("encode identity of node %s: %w", id.Node, err)
	}
	key := identitiesPrefix + id.Node
	if version == 0 {
		_, err = s.st.Create(ctx, key, data)
	} else {
		_, err = s.st.Update(ctx, key, data, version)
	}
	if errors.Is(err, storage.ErrAlreadyExists) || errors.Is(err, storage.ErrConflict) || (version != 0 && errors.Is(err, storage.ErrNotFound)) {
		return fmt.Errorf("%w: node %s", join.ErrIdentityConflict, id.Node)
	}
	if err != nil {
		return fmt.Errorf("record identity of node %s: %w", id.Node, err)
	}
	return nil
}
