package tools

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/loopbot/loopbot/internal/lazyre"
)

// htmlToText renders an HTML document as readable plain text: the title, headings, paragraphs,
// list items and links (with their targets), without scripts, styles or markup. It uses the
// HTML5 parser of golang.org/x/net/html, which accepts any input the way a browser does.
func htmlToText(r io.Reader) (string, error) {
	doc, err := html.Parse(r)
	if err != nil {
		return "", fmt.Errorf("parse html: %w", err)
	}
	w := &textWriter{}
	if t := findTitle(doc); t != "" {
		w.block()
		w.text("Title: " + t)
		w.block()
	}
	w.walk(doc)
	return w.result(), nil
}

func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		return strings.Join(strings.Fields(nodeText(n)), " ")
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Body {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := findTitle(c); t != "" {
			return t
		}
	}
	return ""
}

func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

type textWriter struct {
	b   strings.Builder
	pre int
}

// skipped elements carry no readable text.
var skipped = []atom.Atom{
	atom.Head, atom.Script, atom.Style, atom.Noscript, atom.Template,
	atom.Svg, atom.Math, atom.Iframe, atom.Object, atom.Canvas,
	atom.Select, atom.Button,
}

// blocks start on a line of their own.
var blocks = []atom.Atom{
	atom.P, atom.Div, atom.Br, atom.Li, atom.Ul, atom.Ol,
	atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
	atom.Tr, atom.Table, atom.Section, atom.Article, atom.Header,
	atom.Footer, atom.Nav, atom.Main, atom.Aside, atom.Pre,
	atom.Blockquote, atom.Hr, atom.Dl, atom.Dt, atom.Dd,
	atom.Figure, atom.Figcaption, atom.Form, atom.Address,
}

func (w *textWriter) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
		if slices.Contains(skipped, n.DataAtom) {
			return
		}
	}
	isBlock := n.Type == html.ElementNode && slices.Contains(blocks, n.DataAtom)
	if isBlock {
		w.block()
	}
	switch n.DataAtom {
	case atom.Li:
		w.b.WriteString("- ")
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		w.b.WriteString(strings.Repeat("#", int(n.Data[1]-'0')) + " ")
	case atom.Td, atom.Th:
		w.b.WriteString(" | ")
	case atom.Pre:
		w.pre++
		defer func() { w.pre-- }()
	case atom.Img:
		if alt := attr(n, "alt"); alt != "" {
			w.text("[image: " + alt + "]")
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c)
	}
	if n.DataAtom == atom.A {
		if href := attr(n, "href"); href != "" && !strings.HasPrefix(href, "#") && !strings.HasPrefix(strings.ToLower(href), "javascript:") {
			w.text(" (" + href + ")")
		}
	}
	if isBlock {
		w.block()
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return strings.TrimSpace(a.Val)
		}
	}
	return ""
}

// text appends a run of text, collapsing white space as a browser does outside <pre>.
func (w *textWriter) text(s string) {
	if w.pre > 0 {
		w.b.WriteString(s)
		return
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		if s != "" {
			w.space()
		}
		return
	}
	if s[0] == ' ' || s[0] == '\n' || s[0] == '\t' || s[0] == '\r' {
		w.space()
	}
	w.b.WriteString(strings.Join(fields, " "))
	if last := s[len(s)-1]; last == ' ' || last == '\n' || last == '\t' || last == '\r' {
		w.space()
	}
}

func (w *textWriter) space() {
	s := w.b.String()
	if s != "" && !strings.HasSuffix(s, " ") && !strings.HasSuffix(s, "\n") {
		w.b.WriteByte(' ')
	}
}

func (w *textWriter) block() {
	if s := w.b.String(); s != "" && !strings.HasSuffix(s, "\n") {
		w.b.WriteByte('\n')
	}
}

var blankLines = lazyre.New(`\n{3,}`)

func (w *textWriter) result() string {
	lines := strings.Split(w.b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.TrimSpace(blankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n\n"))
}
