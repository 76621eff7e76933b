package agent

// IdempotencyKey is "run/call": the same for every attempt of one call, in this process or
// in a replica that took the run over, and different for every other call. A tool whose
// service takes one (an Idempotency-Key header, a client token) may pass it on, so that a
// call the loop could not tell ran is not done twice by the service either. The loop itself
// never runs a call that is not idempotent twice (a call found started after a crash or a
// takeover is reported as of unknown outcome).
func (inv Invocation) IdempotencyKey() string { return inv.RunID + "/" + inv.CallID }
