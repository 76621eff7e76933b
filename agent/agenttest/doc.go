// Package agenttest holds test tools for driving the agent loop from other packages' tests:
// a tool whose call holds until the test lets it return, so a test can act while a run is
// surely in the middle of a step, without sleeping and hoping.
package agenttest
