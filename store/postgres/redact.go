package postgres

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// The database URL carries a password more often than not, and it must never reach a log,
// an error or `loopbot check`'s output: every message about the database names it by
// RedactURL, and every error that may quote it (pgx's own, about a URL it could not parse
// or a server it could not reach) passes through redactErr.

// redacted stands in for a password.
const redacted = "xxxxx"

// keywordPassword finds the password of a keyword/value connection string
// ("host=db password=secret"), quoted or not.
var keywordPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactURL returns the connection string with its password replaced: in the user info of
// a URL, in its password query parameter, or in a keyword/value string.
func RedactURL(raw string) string {
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			// Unparseable, so no telling where the password is: say nothing of it.
			return "(a database URL that does not parse)"
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", redacted)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return keywordPassword.ReplaceAllString(raw, "${1}"+redacted)
}

// URLPassword returns the password the connection string carries, or "": the command
// adds it to the values the bot redacts from what it posts.
func URLPassword(raw string) string { return urlPassword(raw) }

// urlPassword returns the password the connection string carries, or "".
func urlPassword(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		if p, ok := u.User.Password(); ok {
			return p
		}
		return u.Query().Get("password")
	}
	if m := keywordPassword.FindStringSubmatch(raw); m != nil {
		return strings.Trim(m[2], "'")
	}
	return ""
}

// redactErr returns err with every copy of secret in its message replaced. errors.Is and
// errors.As still see what err wraps.
func redactErr(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	msg := err.Error()
	// The password as it stands in a URL is escaped; either form may be quoted.
	for _, s := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret), url.UserPassword("", secret).String()[1:]} {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

// Is and As reach what the error wraps; Unwrap is not offered, so nothing prints the
// original message by unwrapping.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }

func (e *redactedError) As(target any) bool { return errors.As(e.err, target) }
