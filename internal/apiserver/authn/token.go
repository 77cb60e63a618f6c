package authn

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
)

// ErrInvalidToken: the request carries a bearer token that is malformed or
// unknown.
var ErrInvalidToken = errors.New("invalid bearer token")

// StaticTokens authenticates "Authorization: Bearer <token>" against a fixed
// set of tokens. A presented token is compared with every known token in
// constant time, so response timing does not reveal how close a guess was.
type StaticTokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum  [sha256.Size]byte
	user User
}

// NewStaticTokens returns an authenticator for tokens, keyed by token. Every
// token and every user name must be non-empty.
func NewStaticTokens(tokens map[string]User) (*StaticTokens, error) {
	t := &StaticTokens{}
	for token, u := range tokens {
		if err := t.add(token, u); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *StaticTokens) add(token string, u User) error {
	if token == "" {
		return errors.New("empty token")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return fmt.Errorf("token for user %q contains whitespace", u.Name)
	}
	if u.Name == "" {
		return errors.New("token with an empty user name")
	}
	sum := sha256.Sum256([]byte(token))
	for _, e := range t.entries {
		if e.sum == sum {
			return fmt.Errorf("duplicate token (users %q and %q)", e.user.Name, u.Name)
		}
	}
	u.Groups = withAuthenticatedGroup(u.Groups)
	t.entries = append(t.entries, tokenEntry{sum: sum, user: u})
	return nil
}

// LoadTokenFile reads a token file in the format of kube-apiserver's
// --token-auth-file: CSV records "token,user,uid" with an optional fourth
// column of comma-separated groups, which must be quoted:
//
//	31ada4fd-adec-460c-809a-9e56ceb75269,admin,admin-uid,"system:masters,ops"
//
// Blank lines and lines starting with # are ignored. Empty or duplicate
// tokens are errors.
func LoadTokenFile(path string) (*StaticTokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	t, err := parseTokenFile(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, nil
}

func parseTokenFile(r io.Reader) (*StaticTokens, error) {
	reader := csv.NewReader(r)
	reader.Comment = '#'
	reader.FieldsPerRecord = -1
	reader.TrimLeadingSpace = true
	t := &StaticTokens{}
	for {
		record, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := reader.FieldPos(0)
		if len(record) < 3 {
			return nil, fmt.Errorf("line %d: want at least 3 columns (token, user name, user uid), found %d", line, len(record))
		}
		u := User{Name: strings.TrimSpace(record[1]), UID: strings.TrimSpace(record[2])}
		if len(record) >= 4 {
			for _, g := range strings.Split(record[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		if err := t.add(strings.TrimSpace(record[0]), u); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
	}
}

// Authenticate implements Authenticator. A request without a bearer token
// is not an error; an unknown or malformed one is ErrInvalidToken.
func (t *StaticTokens) Authenticate(r *http.Request) (*User, bool, error) {
	token, present := bearerToken(r)
	if !present {
		return nil, false, nil
	}
	if token == "" {
		return nil, false, ErrInvalidToken
	}
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range t.entries { // no early exit: constant time in the match position
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, false, ErrInvalidToken
	}
	u := t.entries[match].user
	u.Groups = slices.Clone(u.Groups)
	return &u, true, nil
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header. present is false when there is no bearer authorization at all;
// token is "" when the header is malformed.
func bearerToken(r *http.Request) (token string, present bool) {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, rest, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if strings.ContainsAny(rest, " \t") {
		return "", true
	}
	return rest, true
}
