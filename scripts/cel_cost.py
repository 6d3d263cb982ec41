"""The cost the API server estimates for a CRD's validation rules (CEL) when the CRD is created.

The API server refuses a CRD when one rule's estimated cost, times the number of values the rule
can run on in one object, is over 10,000,000, or when the sum over all the CRD's rules is over
100,000,000. No API server runs where `make manifests-check` does, so this module models that
estimate: cel-go's `checker.Cost` with the size estimates the API server derives from the schema
(`maxLength`, `maxItems`, `maxProperties`, `enum`, else what a 3 MiB request can hold).

The model covers the functions and macros our rules use and a few more (`matches`, `contains`,
string concatenation); any other call, `oldSelf` or a `messageExpression` raises `Unmodelled`,
so that a rule using one makes the check fail until the model learns it. Where the model is
unsure it estimates high: a scalar read from the schema counts one unit of size (the API server
counts none for some), a `has()` counts one, and below a list or map without a bound a value
occurs as often as the smallest value of its type fits in a request (the API server counts an
object's required fields in that size). Passing here is then meant to imply passing the API
server's check; `SELF_TEST` holds the model to figures from Kubernetes' own cost tests.
"""
import ast
import functools
import math
from collections import namedtuple

import lark

PER_RULE_LIMIT = 10_000_000
PER_CRD_LIMIT = 100_000_000
# What the API server takes an unbounded string or list to hold: a request of 3 MiB, less its
# two outer bytes.
REQUEST_BYTES = 3 * 1024 * 1024 - 2
# The smallest serialized item of each type, for the number of items an unbounded list holds.
MIN_ITEM_BYTES = {"string": 2, "number": 1, "integer": 1, "boolean": 4, "object": 2, "array": 2}
STRING_TRAVERSAL = 0.1  # cost a character of a string walked
REGEX_LENGTH = 0.25  # cost a character of a regular expression
LIST_CREATE = 10
MAP_CREATE = 30


class Unmodelled(Exception):
    """A construct the model does not estimate."""


# A value's kind ("string", "bytes", "list", "map", "object", "scalar"), its largest size
# (characters, bytes, items; 1 for a scalar), the schema it comes from (None for one a rule
# builds) and, for a list or map, the value of its items.
Val = namedtuple("Val", "kind size schema item")


def factor(size, per_unit):
    return math.ceil(size * per_unit)


def schema_val(schema):
    """The value a schema node holds, with the size the API server estimates for it."""
    if schema.get("x-kubernetes-int-or-string"):
        return Val("scalar", 1, schema, None)
    kind = schema.get("type")
    if kind == "string":
        if "maxLength" in schema:
            # maxLength counts characters; the API server counts up to 4 bytes each.
            size = schema["maxLength"] * 4
        elif "enum" in schema:
            size = max(len(str(v).encode()) for v in schema["enum"])
        else:
            size = REQUEST_BYTES
        return Val("string", size, schema, None)
    if kind == "array":
        item = schema_val(schema.get("items") or {})
        return Val("list", items_bound(schema, "maxItems", schema.get("items") or {}), schema, item)
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        item = schema_val(schema["additionalProperties"])
        return Val("map", items_bound(schema, "maxProperties", schema["additionalProperties"]), schema, item)
    if kind == "object":
        return Val("object", 1, schema, None)
    return Val("scalar", 1, schema, None)


def items_bound(schema, bound, item_schema):
    if bound in schema:
        return schema[bound]
    return REQUEST_BYTES // (MIN_ITEM_BYTES.get(item_schema.get("type"), 1) + 1)


def literal_val(token):
    text = str(token)
    if token.type in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
        quoted = text.lstrip("bBrR")
        prefix = text[: len(text) - len(quoted)].lower()
        quote = 3 if quoted[:3] in ('"""', "'''") else 1
        value = quoted[quote:-quote] if "r" in prefix else ast.literal_eval(quoted)
        kind = "bytes" if token.type == "BYTES_LIT" else "string"
        return Val(kind, len(value), None, None)
    if token.type not in ("INT_LIT", "UINT_LIT", "FLOAT_LIT", "BOOL_LIT", "NULL_LIT"):
        raise Unmodelled(f"a literal of type {token.type}")
    return Val("scalar", 1, None, None)


SCALAR = Val("scalar", 1, None, None)
# Functions of cost 1 (cel-go's default for O(1) functions) that give a scalar; `dyn`, of cost
# 1 too, gives its argument.
CONSTANT_TIME = {"size", "duration", "timestamp", "int", "uint", "double", "type"}
# The macros, as cel-go's parser expands them into a comprehension: (cost of the accumulator's
# start, cost of the result, cost of each item's loop condition and step beside the predicate).
MACROS = {
    # __result__ && p under @not_strictly_false(__result__)
    "all": (0, 1, 3),
    # __result__ || p under @not_strictly_false(!__result__)
    "exists": (0, 1, 4),
    # p ? __result__ + 1 : __result__, then __result__ == 1
    "exists_one": (0, 2, 2),
    # __result__ + [t]
    "map": (LIST_CREATE, 1, 2 + LIST_CREATE),
    # p ? __result__ + [x] : __result__
    "filter": (LIST_CREATE, 1, 3 + LIST_CREATE),
}


class Estimator:
    """The estimated cost of one rule on the value `self` of the schema it is declared on."""

    def __init__(self, self_schema):
        self.scope = {"self": schema_val(self_schema)}

    def cost(self, node):
        """(largest cost, value) of a parse-tree node."""
        if isinstance(node, lark.Token):
            raise Unmodelled(f"a bare token {node!r}")
        kids = node.children
        handler = getattr(self, "on_" + rule_name(node), None)
        if handler is not None:
            return handler(kids)
        if len(kids) == 1:
            return self.cost(kids[0])
        raise Unmodelled(rule_name(node))

    def on_expr(self, kids):
        if len(kids) == 1:
            return self.cost(kids[0])
        cond, _ = self.cost(kids[0])
        then, then_val = self.cost(kids[1])
        other, other_val = self.cost(kids[2])
        return cond + max(then, other), larger(then_val, other_val)

    def on_conditionalor(self, kids):
        return self.logical(kids)

    def on_conditionaland(self, kids):
        return self.logical(kids)

    def logical(self, kids):
        if len(kids) == 1:
            return self.cost(kids[0])
        return self.cost(kids[0])[0] + self.cost(kids[1])[0], SCALAR

    def on_relation(self, kids):
        if len(kids) == 2:  # the operator around its left operand, then the right one
            op = rule_name(kids[0])
            (lhs, lhs_val), (rhs, rhs_val) = self.cost(kids[0].children[0]), self.cost(kids[1])
            if op == "relation_in":
                walk = rhs_val.size if rhs_val.kind == "list" else 1
                return lhs + rhs + walk, SCALAR
            if op in ("relation_eq", "relation_ne") or lhs_val.kind in ("string", "bytes"):
                return lhs + rhs + factor(min(lhs_val.size, rhs_val.size), STRING_TRAVERSAL), SCALAR
            return lhs + rhs + 1, SCALAR
        return self.cost(kids[0])

    def on_addition(self, kids):
        if len(kids) == 2:
            op = rule_name(kids[0])
            (lhs, lhs_val), (rhs, rhs_val) = self.cost(kids[0].children[0]), self.cost(kids[1])
            if op == "addition_add" and lhs_val.kind in ("string", "bytes"):
                size = lhs_val.size + rhs_val.size
                return lhs + rhs + factor(size, STRING_TRAVERSAL), Val(lhs_val.kind, size, None, None)
            if op == "addition_add" and lhs_val.kind == "list":
                item = larger(lhs_val.item, rhs_val.item)
                return lhs + rhs + 1, Val("list", lhs_val.size + rhs_val.size, None, item)
            return lhs + rhs + 1, SCALAR
        return self.cost(kids[0])

    def on_multiplication(self, kids):
        if len(kids) == 2:
            return self.cost(kids[0].children[0])[0] + self.cost(kids[1])[0] + 1, SCALAR
        return self.cost(kids[0])

    def on_unary(self, kids):
        if len(kids) == 2:  # unary_not or unary_neg, then the operand
            return self.cost(kids[1])[0] + 1, SCALAR
        return self.cost(kids[0])

    def on_paren_expr(self, kids):
        return self.cost(kids[0])

    def on_literal(self, kids):
        return 0, literal_val(kids[0])

    def on_ident(self, kids):
        name = str(kids[0])
        if name not in self.scope:
            raise Unmodelled(f"the identifier {name}")
        return 1, self.scope[name]

    def on_member_dot(self, kids):
        operand, val = self.cost(kids[0])
        return operand + (1 if val.kind in ("object", "map") else 0), field_val(val, str(kids[1]))

    def on_member_index(self, kids):
        (target, val), (index, _) = self.cost(kids[0]), self.cost(kids[1])
        if val.kind not in ("list", "map") or val.item is None:
            raise Unmodelled("an index into something that is not a list or map")
        return target + index + 1, val.item

    def on_list_lit(self, kids):
        items = [self.cost(k) for k in (kids[0].children if kids else [])]
        item = functools.reduce(larger, (val for _, val in items), None)
        return sum(c for c, _ in items) + LIST_CREATE, Val("list", len(items), None, item)

    def on_map_lit(self, kids):
        entries = [self.cost(k) for k in (kids[0].children if kids else [])]
        values = [val for _, val in entries[1::2]]
        item = functools.reduce(larger, values, None)
        return sum(c for c, _ in entries) + MAP_CREATE, Val("map", len(values), None, item)

    def on_ident_arg(self, kids):
        name = str(kids[0])
        args = kids[1].children if len(kids) > 1 else []
        if name == "has":
            # has(x.f): the presence test (one unit; the API server counts none in some releases)
            # and x.
            select = find_member_dot(args[0])
            operand, _ = self.cost(select.children[0])
            return operand + 1, SCALAR
        costs = [self.cost(a) for a in args]
        total = sum(c for c, _ in costs)
        if name == "bytes":
            size = costs[0][1].size
            return total + factor(size, STRING_TRAVERSAL), Val("bytes", size * 4, None, None)
        if name == "string":
            size = costs[0][1].size
            return total + factor(size, STRING_TRAVERSAL), Val("string", size, None, None)
        if name in CONSTANT_TIME:
            return total + 1, SCALAR
        if name == "dyn":
            return total + 1, costs[0][1]
        raise Unmodelled(f"the function {name}()")

    def on_member_dot_arg(self, kids):
        name = str(kids[1])
        args = kids[2].children if len(kids) > 2 else []
        if name in MACROS:
            return self.macro(name, kids[0], args)
        target, target_val = self.cost(kids[0])
        costs = [self.cost(a) for a in args]
        total = target + sum(c for c, _ in costs)
        if name in ("startsWith", "endsWith"):
            return total + factor(costs[0][1].size, STRING_TRAVERSAL), SCALAR
        if name == "contains":
            walk = factor(target_val.size, STRING_TRAVERSAL) * factor(costs[0][1].size, STRING_TRAVERSAL)
            return total + walk, SCALAR
        if name == "matches":
            # One more character of the string, so that an empty one still costs the regex.
            walk = factor(target_val.size + 1, STRING_TRAVERSAL) * factor(costs[0][1].size, REGEX_LENGTH)
            return total + walk, SCALAR
        if name == "size":
            return total + 1, SCALAR
        raise Unmodelled(f"the method {name}()")

    def macro(self, name, target_node, args):
        if name not in MACROS or len(args) != 2:
            raise Unmodelled(f"the macro {name} with {len(args)} arguments")
        start, result, per_item = MACROS[name]
        target, val = self.cost(target_node)
        if val.kind not in ("list", "map"):
            raise Unmodelled(f"{name} over something that is not a list or map")
        var = str(find_ident(args[0]))
        # A map's macros range over its keys, whose size the model takes as a string's largest.
        item = val.item if val.kind == "list" else Val("string", REQUEST_BYTES, None, None)
        outer = self.scope.get(var)
        self.scope[var] = item
        try:
            predicate, _ = self.cost(args[1])
        finally:
            if outer is None:
                del self.scope[var]
            else:
                self.scope[var] = outer
        # The comprehension's range, its start and result, and each item's loop.
        return target + start + result + val.size * (per_item + predicate), (
            Val("list", val.size, None, item) if name in ("map", "filter") else SCALAR)


def rule_name(node):
    """The grammar rule of a parse-tree node as a plain string ("" for a token)."""
    return str(node.data) if isinstance(node, lark.Tree) else ""


def larger(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a if a.size >= b.size else b


def field_val(val, name):
    if val.schema is None:
        raise Unmodelled(f"the field {name} of a value a rule builds")
    if val.kind == "map":
        return val.item
    props = val.schema.get("properties") or {}
    if name not in props:
        raise Unmodelled(f"the field {name}, which the schema does not declare")
    return schema_val(props[name])


def find(node, data):
    """The node of rule `data` that `node` is, alone, wrapped in; None if it is not."""
    while isinstance(node, lark.Tree) and rule_name(node) != data:
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return node if isinstance(node, lark.Tree) else None


def find_member_dot(node):
    found = find(node, "member_dot")
    if found is None:
        raise Unmodelled("has() of something that is not a field")
    return found


def find_ident(node):
    found = find(node, "ident")
    if found is None:
        raise Unmodelled("a macro whose variable is not a name")
    return found.children[0]


def rule_cost(parse_tree, self_schema):
    """The largest cost of one evaluation of a rule declared on `self_schema`."""
    return Estimator(self_schema).cost(parse_tree)[0]


def crd_rule_costs(schema, compile_rule, at="", cardinality=1):
    """(where, rule, cost of one evaluation, evaluations in one object at most) of every rule
    of a CRD schema. Below a list or map without a bound, the API server counts a value as often
    as the smallest one of its type fits in a request (`cardinality` None until then)."""
    times = cardinality
    if times is None:
        times = REQUEST_BYTES // (MIN_ITEM_BYTES.get(schema.get("type"), 1) + 1)
    rules = schema.get("x-kubernetes-validations") or []
    if any("messageExpression" in rule for rule in rules):
        raise Unmodelled(f"{at or '.'}: a messageExpression, whose cost the API server counts too")
    found = [(at or ".", rule["rule"], rule_cost(compile_rule(rule["rule"]), schema), times) for rule in rules]
    for key, sub in (schema.get("properties") or {}).items():
        found += crd_rule_costs(sub, compile_rule, f"{at}.{key}", cardinality)
    for key, bound, mark in (("items", "maxItems", "[*]"), ("additionalProperties", "maxProperties", "{*}")):
        sub = schema.get(key)
        if isinstance(sub, dict):
            below = None if cardinality is None or bound not in schema else cardinality * schema[bound]
            found += crd_rule_costs(sub, compile_rule, at + mark, below)
    return found


def string_schema(max_length=None):
    schema = {"type": "string"}
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


def array_schema(item, max_items=None):
    schema = {"type": "array", "items": item}
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


# Cases of Kubernetes' TestCostEstimation (apiextensions-apiserver, schema/cel), with the cost it
# expects: (rule, the schema of self, expected cost). Each is one the model estimates exactly.
SELF_TEST = [
    ("self.all(x, true)", array_schema({"type": "string"}, 20), 62),
    ("self.all(x, true)", array_schema({"type": "number"}, 10), 32),
    ("self.all(x, true)", array_schema({"type": "string"}), 3145727),
    ("self.all(x, true)", array_schema({"type": "number"}), 4718591),
    ("self.all(x, true)", array_schema({"type": "boolean"}), 1887437),
    ("self.all(x, self.all(y, true))", array_schema({"type": "number"}, 10), 352),
    ("self.all(x, self.all(y, self.all(z, true)))", array_schema({"type": "number"}, 10), 3552),
    ("self.startsWith('test')", string_schema(15), 2),
    ("self.contains('test')", string_schema(10), 5),
    ('size(self + "hello") > size("hello")', string_schema(4), 7),
    ('self.matches("x")', string_schema(50), 22),
    ('"".matches("(((((((((())))))))))[0-9]")', string_schema(10), 7),
    ('self == "x"', string_schema(), 2),
    ("self.all(x, x.y == 25.2)",
     array_schema({"type": "object", "additionalProperties": {"type": "number"}}, 12), 74),
    ("self[0].x > 2.0",
     array_schema({"type": "object", "additionalProperties": {"type": "number"}}, 3000), 4),
]


def self_test(compile_rule):
    """The cases of SELF_TEST the model does not estimate as Kubernetes does, as messages."""
    wrong = []
    for rule, schema, expected in SELF_TEST:
        got = rule_cost(compile_rule(rule), schema)
        if got != expected:
            wrong.append(f"{rule!r} on {schema}: the model estimates {got}, Kubernetes {expected}")
    return wrong
