package slack

import (
	"net/url"

	"github.com/loopbot/loopbot/internal/lazyre"
)

// anyURL finds URLs in text meant for logs.
var anyURL = lazyre.New(`https?://[^\s"'<>]+`)

// logSafe is err as text for a log line, with every URL cut to its scheme and host. A slash
// command's response_url is a bearer credential: whoever has it may post into the channel as
// the app for thirty minutes. The HTTP client puts the whole URL into its errors, so an error
// of a call made with it must never be logged as it is.
func logSafe(err error) string {
	if err == nil {
		return ""
	}
	return anyURL.ReplaceAllStringFunc(err.Error(), func(s string) string {
		u, perr := url.Parse(s)
		if perr != nil || u.Host == "" {
			return "(a URL)"
		}
		if u.Path == "" || u.Path == "/" {
			return u.Scheme + "://" + u.Host
		}
		return u.Scheme + "://" + u.Host + "/…"
	})
}
