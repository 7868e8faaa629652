"""`portscan verify`: run the project's own training entry point and judge the port."""
