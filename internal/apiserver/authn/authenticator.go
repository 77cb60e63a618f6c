package authn

import (
	"errors"
	"net/http"
)

// Authenticator identifies the user behind a request. It returns ok=false
// with a nil error when the request carries no credentials it understands,
// and an error when it carries such credentials but they are invalid.
type Authenticator interface {
	Authenticate(r *http.Request) (user *User, ok bool, err error)
}

// Union tries each authenticator in order and returns the first user found.
// If none finds one, it returns the joined errors of those that rejected
// the request (nil if the request was simply anonymous).
type Union []Authenticator

// Authenticate implements Authenticator.
func (u Union) Authenticate(r *http.Request) (*User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.Authenticate(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return user, true, nil
		}
	}
	return nil, false, errors.Join(errs...)
}
