package agent

// floorReason says what raised a call of tool to floor: what the command that set the floor
// gave as its reason, or else the config file's [agent.risk] table, named as the person
// would look for it.
func (c Config) floorReason(tool string, floor Risk) string {
	if why := c.RiskFloorReason[tool]; why != "" {
		return "raised to " + floor.String() + ": " + why
	}
	return "raised to " + floor.String() + " by " + tool + " in [agent.risk] of the config file"
}
