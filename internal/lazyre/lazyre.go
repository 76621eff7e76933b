// Package lazyre holds regular expressions that are compiled on first use. A package-level
// regexp.MustCompile runs at every start of the binary, whether the expression is ever used
// or not: loopbot's packages compiled about twenty at init, 250 KB of heap the idle daemon
// kept, since nothing else made it collect. A pattern compiled late still must be valid, so
// each package's tests call Check on its patterns.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on its first use. Its methods are those of
// regexp.Regexp that loopbot uses.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// New returns expr, to be compiled on first use. An invalid expression panics then, as
// regexp.MustCompile would have at start.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// Regexp returns the compiled expression.
func (r *Regexp) Regexp() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

// Check compiles every expression and returns the first error, for tests.
func Check(rs ...*Regexp) error {
	for _, r := range rs {
		if _, err := regexp.Compile(r.expr); err != nil {
			return err
		}
	}
	return nil
}

func (r *Regexp) String() string { return r.expr }

func (r *Regexp) MatchString(s string) bool { return r.Regexp().MatchString(s) }

func (r *Regexp) FindStringSubmatch(s string) []string { return r.Regexp().FindStringSubmatch(s) }

func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.Regexp().FindAllStringSubmatch(s, n)
}

func (r *Regexp) FindAllStringIndex(s string, n int) [][]int {
	return r.Regexp().FindAllStringIndex(s, n)
}

func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Regexp().ReplaceAllString(src, repl)
}

func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.Regexp().ReplaceAllStringFunc(src, repl)
}
