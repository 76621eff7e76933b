package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
)

// defaultRetryAfter is the wait reported for a 429 that says nothing of how long to wait.
const defaultRetryAfter = time.Second

// rateHint carries what the transport saw of a 429 back to the call that made the request:
// discordgo's RateLimitError keeps the body's retry_after but not the headers, and a 429
// whose body is not JSON comes back as a bare decoding error.
type rateHint struct {
	mu         sync.Mutex
	limited    bool
	retryAfter time.Duration
}

type rateHintKey struct{}

// withRateHint returns a context that lets the transport record a 429 in h.
func withRateHint(ctx context.Context, h *rateHint) context.Context {
	return context.WithValue(ctx, rateHintKey{}, h)
}

// transport points discordgo at cfg.APIURL and keeps discordgo's rate limiter idle: it
// records the rate limit headers of a 429 for the caller and removes all of them before
// discordgo reads them, because discordgo's bucket pacing sleeps without a context and the
// bot's dispatcher paces instead.
type transport struct {
	base *url.URL // nil: talk to discord.com
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.base != nil && req.URL.Host == "discord.com" {
		req = req.Clone(req.Context())
		req.URL.Scheme = t.base.Scheme
		req.URL.Host = t.base.Host
		req.URL.Path = strings.TrimSuffix(t.base.Path, "/") + req.URL.Path
		req.URL.RawPath = ""
		req.Host = ""
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if h, ok := req.Context().Value(rateHintKey{}).(*rateHint); ok {
			h.mu.Lock()
			h.limited = true
			h.retryAfter = headerRetryAfter(resp.Header)
			h.mu.Unlock()
		}
	}
	for k := range resp.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Ratelimit-") {
			resp.Header.Del(k)
		}
	}
	return resp, nil
}

// headerRetryAfter reads the wait from a 429's headers: Retry-After in seconds, or
// X-RateLimit-Reset-After in fractional seconds.
func headerRetryAfter(h http.Header) time.Duration {
	for _, k := range []string{"X-RateLimit-Reset-After", "Retry-After"} {
		if v, err := strconv.ParseFloat(h.Get(k), 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Second))
		}
	}
	return 0
}

// call runs one REST call with ctx and turns its error into what the bot acts on.
func call[T any](ctx context.Context, op string, fn func(opts ...discordgo.RequestOption) (T, error)) (T, error) {
	h := &rateHint{}
	v, err := fn(discordgo.WithContext(withRateHint(ctx, h)))
	if err != nil {
		return v, fmt.Errorf("%s: %w", op, classify(err, h))
	}
	return v, nil
}

// classify maps a discordgo error: a 429 to *bot.RateLimitError with Discord's wait, a
// refusal that retrying cannot fix (bad request, bad token, missing access or permission,
// unknown channel or message) to *bot.PermanentError, anything else (5xx, network) as is,
// for the bot to retry with backoff.
func classify(err error, h *rateHint) error {
	h.mu.Lock()
	limited, hinted := h.limited, h.retryAfter
	h.mu.Unlock()
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) || limited {
		wait := hinted
		if rl != nil && rl.TooManyRequests != nil && rl.RetryAfter > 0 {
			wait = rl.RetryAfter
		}
		if wait <= 0 {
			wait = defaultRetryAfter
		}
		return &bot.RateLimitError{RetryAfter: wait}
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		code := re.Response.StatusCode
		if code >= 400 && code < 500 && code != http.StatusRequestTimeout {
			return &bot.PermanentError{Err: err}
		}
	}
	return err
}

// apiCode is Discord's JSON error code of err, or 0.
func apiCode(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		return re.Message.Code
	}
	return 0
}
