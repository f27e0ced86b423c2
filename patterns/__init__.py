"""Federation patterns (all-active, active-passive, spillover), failover clients and outage drills."""
