package web

import (
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// allowedTags is every element the renderers may emit, with the attributes each may carry.
var allowedTags = map[string]map[string]bool{
	"p": {"class": true}, "br": {}, "strong": {}, "em": {}, "del": {}, "code": {}, "pre": {"class": true}, "blockquote": {},
	"ul": {"class": true}, "ol": {}, "li": {"class": true},
	"a":       {"href": true, "rel": true, "target": true},
	"article": {"class": true}, "h3": {"class": true}, "div": {"class": true},
	"dl": {"class": true}, "dt": {}, "dd": {}, "span": {"class": true, "aria-hidden": true}, "footer": {"class": true},
	"time":    {"datetime": true},
	"button":  {"type": true, "class": true, "data-action": true, "data-confirm": true, "data-reason": true, "data-feedback": true},
	"input":   {"type": true, "class": true, "maxlength": true, "placeholder": true, "aria-label": true},
	"details": {"class": true, "data-step": true}, "summary": {},
}

// checkSafeHTML fails the test if s holds anything but allowlisted elements and attributes,
// a link to anything but http or https, or the text of a script tag or URL.
func checkSafeHTML(t testing.TB, s string) {
	t.Helper()
	lower := strings.ToLower(s)
	for _, bad := range []string{"<script", "javascript:"} {
		if strings.Contains(lower, bad) {
			t.Fatalf("output contains %q:\n%s", bad, s)
		}
	}
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			attrs, ok := allowedTags[tok.Data]
			if !ok {
				t.Fatalf("element <%s> is not allowed:\n%s", tok.Data, s)
			}
			for _, at := range tok.Attr {
				if strings.HasPrefix(at.Key, "on") || !attrs[at.Key] {
					t.Fatalf("attribute %s on <%s> is not allowed:\n%s", at.Key, tok.Data, s)
				}
				if at.Key == "href" {
					u, err := url.Parse(at.Val)
					// The console's own view of a run's files is the one link that stays on it.
					own := u != nil && u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/files/")
					if err != nil || (u.Scheme != "http" && u.Scheme != "https" && !own) {
						t.Fatalf("link to %q:\n%s", at.Val, s)
					}
				}
				if at.Key == "rel" && at.Val != "noopener nofollow" {
					t.Fatalf("rel=%q, want noopener nofollow", at.Val)
				}
			}
		}
	}
}

func TestRenderMarkdown(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"paragraphs", "one\ntwo\n\nthree", "<p>one<br>two</p>\n<p>three</p>\n"},
		{"emphasis", "**bold** and *em* and _em_ and __bold__", "<p><strong>bold</strong> and <em>em</em> and <em>em</em> and <strong>bold</strong></p>\n"},
		{"snake case and spaced stars stay", "call read_file_now and 2 * 3 * 4", "<p>call read_file_now and 2 * 3 * 4</p>\n"},
		{"code span", "run `ls <dir> && rm` now", "<p>run <code>ls &lt;dir&gt; &amp;&amp; rm</code> now</p>\n"},
		{"emphasis not inside code", "`*x*`", "<p><code>*x*</code></p>\n"},
		{"code block", "```go\nfmt.Println(\"<b>\")\n\n  x := 1\n```\nafter", "<pre><code>fmt.Println(&#34;&lt;b&gt;&#34;)\n\n  x := 1</code></pre>\n<p>after</p>\n"},
		{"unclosed code block", "```\nrest", "<pre><code>rest</code></pre>\n"},
		{"bullets", "- one\n- two\n  more\n* three", "<ul>\n<li>one</li>\n<li>two<br>more</li>\n<li>three</li>\n</ul>\n"},
		{"ordered then text", "1. a\n2) b\n\ntext", "<ol>\n<li>a</li>\n<li>b</li>\n</ol>\n<p>text</p>\n"},
		{"heading", "## Result ##", "<p><strong>Result</strong></p>\n"},
		{"link", "see [the docs](https://example.com/a?b=1&c=2)", `<p>see <a href="https://example.com/a?b=1&amp;c=2" rel="noopener nofollow" target="_blank">the docs</a></p>` + "\n"},
		{"escape", `\*not em\*`, "<p>*not em*</p>\n"},
		{"ampersand", "a & b < c > d \"e\" 'f'", "<p>a &amp; b &lt; c &gt; d &#34;e&#34; &#39;f&#39;</p>\n"},
		{"empty", "", ""},
		{"strike", "~~gone~~ but ~one~ stays", "<p><del>gone</del> but ~one~ stays</p>\n"},
		{"quote", "> said\n> twice\nafter", "<blockquote><p>said<br>twice</p></blockquote>\n<p>after</p>\n"},
		{"tilde fence", "~~~\n<x>\n~~~", "<pre><code>&lt;x&gt;</code></pre>\n"},
		{"bold in heading", "## **Sub** *it*", "<p><strong>Sub <em>it</em></strong></p>\n"},
		{"emphasis in a link label", "[**x**](https://e.com)", `<p><a href="https://e.com" rel="noopener nofollow" target="_blank"><strong>x</strong></a></p>` + "\n"},

		// Hostile input: all of it comes out as text.
		{"script tag", "<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"},
		{"img onerror", `<img src=x onerror="alert(1)">`, "<p>&lt;img src=x onerror=&#34;alert(1)&#34;&gt;</p>\n"},
		{"javascript link", "[click](javascript:alert(1))", "<p>[click](javascript&#58;alert(1))</p>\n"},
		{"javascript link upper case", "[x](JaVaScRiPt:alert(1))", "<p>[x](JaVaScRiPt&#58;alert(1))</p>\n"},
		{"data link", "[x](data:text/html,<script>alert(1)</script>)", "<p>[x](data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;)</p>\n"},
		{"relative link", "[x](/admin)", "<p>[x](/admin)</p>\n"},
		{"link with credentials", "[x](https://user:pw@example.com/)", "<p>[x](https://user:pw@example.com/)</p>\n"},
		{"attribute breakout", `[x](https://e.com/"onmouseover="alert(1))`, `<p><a href="https://e.com/%22onmouseover=%22alert%281" rel="noopener nofollow" target="_blank">x</a>)</p>` + "\n"},
		{"link label with html", "[<b>x</b>](https://e.com)", `<p><a href="https://e.com" rel="noopener nofollow" target="_blank">&lt;b&gt;x&lt;/b&gt;</a></p>` + "\n"},
		{"script URL in text", "javascript:alert(1)", "<p>javascript&#58;alert(1)</p>\n"},
		{"script URL in query", "[x](https://e.com/?u=javascript:alert)", `<p><a href="https://e.com/?u=javascript&#58;alert" rel="noopener nofollow" target="_blank">x</a></p>` + "\n"},
		{"html in list", "- <iframe src=x>", "<ul>\n<li>&lt;iframe src=x&gt;</li>\n</ul>\n"},
		{"deep emphasis", strings.Repeat("*a ", 50), "<p>" + strings.Repeat("*a ", 49) + "*a</p>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderMarkdown(tt.in)
			if got != tt.want {
				t.Errorf("renderMarkdown(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			checkSafeHTML(t, got)
		})
	}
}

func FuzzRenderMarkdown(f *testing.F) {
	for _, s := range []string{
		"**a** *b* `c` [d](https://e.com)\n- x\n1. y\n```\ncode\n```",
		"<script>alert(1)</script>", `<img src=x onerror=alert(1)>`, "[x](javascript:alert(1))",
		"[x](https://e.com/\"onclick=\"alert(1))", "***__**_*_", "[[[]]](((", "java\\script:",
		"<a href=\"javascript:alert(1)\">x</a>", "<svg/onload=alert(1)>", "[x](jav&#x09;ascript:alert(1))",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkSafeHTML(t, renderMarkdown(s))
	})
}
