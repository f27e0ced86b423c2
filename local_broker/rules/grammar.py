"""The SQL filter and action grammar (lark, LALR) and the translation of lark's errors into RuleSyntaxError.

Conditions and value expressions share one grammar, as in SQL parsers, so parentheses can hold
either; the compiler then checks that each place holds the right kind (a condition where a
condition is needed, a value where a value is needed).
"""

from __future__ import annotations

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from local_broker.rules.errors import RuleSyntaxError

GRAMMAR = r"""
filter: condition
action: statement+
?statement: SET property EQUALS condition SEMICOLON? -> set_statement
          | REMOVE property SEMICOLON?             -> remove_statement

?condition: conjunction
          | condition OR conjunction   -> or_
?conjunction: negation
            | conjunction AND negation -> and_
?negation: predicate
         | NOT negation                -> not_
?predicate: sum
          | sum comparison_operator sum                 -> comparison
          | sum NOT? LIKE sum (ESCAPE sum)?             -> like
          | sum NOT? IN "(" sum ("," sum)* ")"          -> in_
          | sum IS NOT? NULL                            -> is_null
!comparison_operator: EQUALS | NOT_EQUALS | LESS | LESS_EQUALS | GREATER | GREATER_EQUALS
?sum: product
    | sum (PLUS | MINUS) product       -> arithmetic
?product: unary
        | product (STAR | SLASH | PERCENT) unary -> arithmetic
?unary: atom
      | (PLUS | MINUS) unary           -> unary
?atom: constant
     | property
     | PARAMETER                       -> parameter
     | function
     | EXISTS "(" (property | function) ")" -> exists
     | "(" condition ")"
function: NAME "(" (sum ("," sum)*)? ")"
property: (name ".")? name
?name: NAME | DELIMITED_NAME | QUOTED_NAME
constant: INTEGER | DECIMAL | APPROXIMATE | STRING | TRUE | FALSE | NULL

AND: "and"i
OR: "or"i
NOT: "not"i
IS: "is"i
NULL: "null"i
IN: "in"i
LIKE: "like"i
ESCAPE: "escape"i
EXISTS: "exists"i
TRUE: "true"i
FALSE: "false"i
SET: "set"i
REMOVE: "remove"i

NAME: /[^\W\d_]\w*/i
DELIMITED_NAME: /\[([^\]]|\]\])*\]/
QUOTED_NAME: /"([^"]|"")*"/
PARAMETER: /@\w+/
STRING: /'([^']|'')*'/
APPROXIMATE.2: /\d+(\.\d*)?[eE][+-]?\d+/
DECIMAL.1: /\d+\.\d*/
INTEGER: /\d+/

EQUALS: "="
NOT_EQUALS: "<>" | "!="
LESS: "<"
LESS_EQUALS: "<="
GREATER: ">"
GREATER_EQUALS: ">="
PLUS: "+"
MINUS: "-"
STAR: "*"
SLASH: "/"
PERCENT: "%"
LPAR: "("
RPAR: ")"
COMMA: ","
DOT: "."
SEMICOLON: ";"

%import common.WS
%ignore WS
"""

_PARSER = Lark(GRAMMAR, start=["filter", "action"], parser="lalr", lexer="basic", propagate_positions=True)

_OPERANDS = frozenset(
    {"NAME", "DELIMITED_NAME", "QUOTED_NAME", "PARAMETER", "STRING", "INTEGER", "DECIMAL", "APPROXIMATE"}
    | {"TRUE", "FALSE", "NULL", "EXISTS", "LPAR", "PLUS", "MINUS", "NOT"}
)
_OPERATORS = frozenset(
    {"EQUALS", "NOT_EQUALS", "LESS", "LESS_EQUALS", "GREATER", "GREATER_EQUALS", "PLUS", "MINUS", "STAR"}
    | {"SLASH", "PERCENT", "AND", "OR", "LIKE", "IN", "IS", "NOT", "ESCAPE"}
)
_PATTERNS = {terminal.name: terminal.pattern for terminal in _PARSER.terminals}
_ACTION_ONLY = frozenset({"SET", "REMOVE", "SEMICOLON"})
_DISPLAY = {"NOT_EQUALS": "'<>'", "$END": "the end of the expression", "NAME": "a name"}
_UNTERMINATED = {"'": "string constant", "[": "delimited property name", '"': "quoted property name"}


def _expected(terminals: set[str], start: str) -> str:
    """What the parser would have accepted, in words ("an expression", "an operator", "')'")."""
    if start == "filter":
        terminals -= _ACTION_ONLY
    shown: set[str] = set()
    if terminals & (_OPERANDS - {"PLUS", "MINUS", "NOT", "LPAR"}):
        shown.add("an expression")
        terminals -= _OPERANDS
    if len(terminals & _OPERATORS) > 1 and terminals & (_OPERATORS - {"PLUS", "MINUS", "NOT"}):
        shown.add("an operator")
        terminals -= _OPERATORS
    for terminal in terminals:
        pattern = _PATTERNS.get(terminal)
        if terminal in _DISPLAY:
            shown.add(_DISPLAY[terminal])
        elif pattern is not None and pattern.type == "str":
            shown.add(f"'{pattern.value.upper()}'")
        else:
            shown.add(terminal.lower())
    words = sorted(shown)
    return (
        ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else (words[0] if words else "nothing")
    )


def _syntax_error(error: UnexpectedInput, text: str, start: str) -> RuleSyntaxError:
    if isinstance(error, UnexpectedCharacters):
        char = text[error.pos_in_stream]
        if char in _UNTERMINATED:
            return RuleSyntaxError(f"unterminated {_UNTERMINATED[char]}", text, error.pos_in_stream + 1)
        return RuleSyntaxError(f"unexpected character {char!r}", text, error.pos_in_stream + 1)
    if isinstance(error, UnexpectedToken) and error.token.type != "$END":
        token: Token = error.token
        expected = _expected(set(error.accepts or error.expected), start)
        return RuleSyntaxError(f"unexpected '{token.value}'; expected {expected}", text, token.start_pos + 1)
    expected = _expected(set(getattr(error, "expected", ()) or ()), start)
    return RuleSyntaxError(f"unexpected end of expression; expected {expected}", text, len(text) + 1)


MAX_NESTING = 128
# Operators whose left-nested chains (a AND b AND c, a + b - c) the compiler flattens: no nesting.
_CHAINS = frozenset({"and_", "or_", "arithmetic"})


def _check_nesting(tree: Tree, text: str) -> None:
    """Refuse operators nested more than MAX_NESTING deep (the compiler recurses over nesting)."""
    pending = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_NESTING:
            position = 1 if node.meta.empty else node.meta.start_pos + 1
            raise RuleSyntaxError(
                f"the expression nests more than {MAX_NESTING} operators deep", text, position
            )
        for index, child in enumerate(node.children):
            if isinstance(child, Tree):
                chained = index == 0 and child.data == node.data and node.data in _CHAINS
                pending.append((child, depth if chained else depth + 1))


def parse(text: str, start: str) -> Tree:
    """The lark tree of a filter (`start="filter"`) or an action (`start="action"`)."""
    try:
        tree = _PARSER.parse(text, start=start)
    except (UnexpectedToken, UnexpectedCharacters, UnexpectedEOF) as error:
        raise _syntax_error(error, text, start) from None
    _check_nesting(tree, text)
    return tree
