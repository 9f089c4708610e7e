"""Result views: what the widget draws from a tool's result, chosen per tool in the agent
file (docs/agents.md "Views"). ``paths`` reads values out of a result, ``spec`` checks a
tool's ``view`` when the file loads, ``drawn`` builds the bounded data the widget and the
console draw. Data only, never HTML: every value reaches the page as text."""
