// Package text holds the text helpers every adapter shares: clipping to a platform's limit
// without breaking a character (clip.go), splitting a long text into messages without
// leaving a code block open (split.go), the checklist mark of a plan status (plan.go), and
// a small Markdown tokenizer (markdown.go for blocks, inline.go for spans) that each
// renderer walks to write its own syntax: mrkdwn for Slack, Discord's Markdown, HTML for
// the web console.
//
// Platforms state their limits in characters without saying which: Discord's and Slack's
// documentation say "characters" only. Every function here says what its lengths count.
// Bytes are the safe unit where a platform may count UTF-16 code units (an emoji is then
// two): a text of n bytes is never more than n characters by any count. Runes (Unicode
// code points) are the unit where a limit is known to count them.
//
// The package is a leaf: it imports only the standard library, so that bot and every
// adapter can use it.
package text
