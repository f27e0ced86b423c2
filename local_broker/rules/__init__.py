"""The Service Bus SQL filter and action language, compiled once per rule into generated Python.

A pure library (stdlib + lark). lark parses (LALR); the compiler turns the tree into the source of
one Python function per filter (and per action value) and compiles it once with `compile()`, so a
message is filtered by one plain function call, never by walking a tree. The engine uses exactly this:

    f = compile_filter("sys.Label LIKE '%bus%' AND color = @c", parameters={"@c": "red"})
    f.matches(message) -> bool     # True only when the condition is TRUE (FALSE and UNKNOWN -> False)
    a = compile_action("SET quantity = quantity / 2; REMOVE priority; SET sys.TimeToLive = '0:2:0'")
    a.apply(message) -> None       # mutates the message in place
    c = compile_correlation_filter(correlation_id=..., label=..., properties={...})
    c.matches(message) -> bool
    f.condition(message) -> True | False | None   # the three-valued outcome (None = UNKNOWN)

`message` is any RuleTarget: `application_properties` (a dict keeping the senders' key casing) and
`get_system_property(name)` / `set_system_property(name, value)` with the canonical names of
SYSTEM_PROPERTIES (lower-case SQL name -> canonical name; `sys.Subject` is `Label`). Values: str for
ids and strings, timedelta for TimeToLive, aware UTC datetime for *Utc, int for numbers, None when unset.

Errors
* RuleSyntaxError(ValueError) when a rule is created: `.position` (1-based character offset),
  `.line`, `.column`, and a message such as "Syntax error at column 17: unexpected 'AND'; expected an
  expression". Also raised for unknown `sys.` names, unknown scopes, functions and parameters, a
  value where a condition is needed, texts over 1,024 characters, operators nested more than 128
  deep, actions over 32 statements,
  actions assigning broker-owned system properties, and constants that cannot be assigned
  (e.g. `SET sys.TimeToLive = 'soon'`). The engine maps it to the 400 / argument error.
* FilterEvaluationError(type_name, message) when a rule runs on a message; `.type_name` is the .NET
  exception type Service Bus writes into DeadLetterReason, the message goes into
  DeadLetterErrorDescription. Nothing else escapes `matches` or `apply`.

Semantics (choices where the documentation is silent are marked [choice])
* Names: keywords and `sys.` names are case-insensitive; user property names are matched ignoring
  case, character by character (an exact-case key wins; if a message holds several other casings of
  one name, which one is read is unspecified); bare names are `user.` names. `[name]` and `"name"`
  quote any name; keywords (AND OR NOT IS NULL IN LIKE ESCAPE EXISTS TRUE FALSE SET REMOVE) are reserved.
* Three-valued logic: a missing user property, or one holding None, is UNKNOWN; arithmetic and
  comparisons with UNKNOWN are UNKNOWN; `x IS NULL` is TRUE for a missing or None property;
  `EXISTS(x)` is TRUE for a present property even if it holds None [choice]; `[NOT] IN` is UNKNOWN
  only when its left operand is, and NULL list items never match; NOT UNKNOWN is UNKNOWN.
* AND / OR do not depend on operand order [choice]: AND is FALSE when any operand is FALSE, OR is TRUE
  when any is TRUE, even if another operand fails; otherwise the leftmost failure is raised. IN behaves
  as an OR of equalities.
* Types follow C# [choice]: Int64 and Double mix as Double (Int64 and Decimal as Decimal); strings
  compare ordinally (UTF-16 code units) and case-sensitively, LIKE too; Boolean supports only = and
  <>; DateTime and TimeSpan compare among themselves and support DateTime +/- TimeSpan,
  DateTime - DateTime, TimeSpan +/- TimeSpan; String + String concatenates.
  Operands with no implicit conversion between them (String vs Int64, Boolean vs Int64, ...) raise
  InvalidCastException, even for = and <>; an operator the type lacks (String * String, Boolean < Boolean)
  raises InvalidOperationException. Int64 arithmetic is checked (OverflowException), integer / and %
  truncate toward zero, and integer division by zero raises DivideByZeroException; Double division by
  zero gives infinity or NaN, as in .NET. A LIKE operand or pattern that is not a String raises
  InvalidCastException.
* Functions: newid() is a new uuid.UUID (a Guid; converted to its string when assigned to a string
  system property); property(name) / p(name) read the user property whose name the argument gives
  (`p('sys.Label')` is a user property of that name, as observed on the service).
* Parameters: `@name` takes the typed value from `parameters` (keys with or without '@', any case);
  an unknown parameter is a RuleSyntaxError.
* Actions: statements run in order (';' optional). SET on a user property creates it or replaces its
  value, keeping the existing key's casing and converting an Int64 into an existing Double/Decimal
  property; other values replace the property with their own type [choice]. SET of an UNKNOWN value stores
  None. REMOVE deletes every case-variant of the name. System targets must be in
  SETTABLE_SYSTEM_PROPERTIES; strings parse into TimeSpan (`[-][d.]hh:mm[:ss[.fffffff]]`, e.g. '0:2:0')
  for sys.TimeToLive and ISO 8601 for sys.ScheduledEnqueueTimeUtc; REMOVE sys.X sets it to None.
"""

from local_broker.rules.actions import SqlRuleAction, compile_action
from local_broker.rules.errors import FilterEvaluationError, RuleSyntaxError
from local_broker.rules.filters import (
    CorrelationFilter,
    SqlFilter,
    compile_correlation_filter,
    compile_filter,
)
from local_broker.rules.target import (
    SETTABLE_SYSTEM_PROPERTIES,
    SYSTEM_PROPERTIES,
    MessageProperties,
    RuleTarget,
)

__all__ = [
    "SETTABLE_SYSTEM_PROPERTIES",
    "SYSTEM_PROPERTIES",
    "CorrelationFilter",
    "FilterEvaluationError",
    "MessageProperties",
    "RuleSyntaxError",
    "RuleTarget",
    "SqlFilter",
    "SqlRuleAction",
    "compile_action",
    "compile_correlation_filter",
    "compile_filter",
]
