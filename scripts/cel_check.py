"""What the API server checks of a CEL expression when it compiles one: its types and its cost.

When a CRD is created, the API server compiles each validation rule with cel-go: a rule that is
ill-typed (a field the schema does not declare, a string compared with an int, a list literal
of two types, a result that is not a bool) is refused, and so is a CRD one of whose rules'
estimated cost, times the number of values the rule can run on in one object, is over
10,000,000, or whose rules' sum is over 100,000,000. Then nothing of that controller installs.
An admission webhook's matchConditions are compiled and type-checked the same way when its
configuration is created (their cost is bounded only as they run). No API server runs where
`make manifests-check` does, so this module models both: cel-go's type checker on the types the
API server declares (from the schema for a rule, `AdmissionRequest` and dyn objects for a match
condition), and cel-go's `checker.Cost` with the size estimates the API server derives from the
schema (`maxLength`, `maxItems`, `maxProperties`, `enum`, else what a 3 MiB request can hold).

The model covers the functions and macros our expressions use and a few more (`matches`,
`contains`, `endsWith`, conversions, arithmetic); any other call, `oldSelf` or a
`messageExpression` raises `Unmodelled`, so that a rule using one makes the check fail until the
model learns it. Where the model is unsure it is the stricter: it types as cel-go does with
homogeneous aggregate literals and without cross-type numeric comparisons, and for the cost a
scalar read from the schema counts one unit of size (the API server counts none for some), a
`has()` counts one, and below a list or map without a bound a value occurs as often as the
smallest value of its type fits in a request (the API server counts an object's required fields
in that size). Passing here is then meant to imply passing the API server's checks;
`COST_SELF_TEST` and `TYPE_SELF_TEST` hold the model to cases of Kubernetes' own tests.
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
    """A construct the model does not check."""


class IllTyped(Exception):
    """An expression cel-go's type checker refuses; the message words it as cel-go does."""


# A value's CEL type and size. `kind` is the type: "bool", "int", "uint", "double", "string",
# "bytes", "duration", "timestamp", "null", "type", "dyn", "list", "map", "object", or "any" for
# the items of an empty literal, which take any type. `size` is its largest size (characters,
# bytes, items; 1 for a scalar); `schema` the schema it comes from (None for one an expression
# builds); `item` a list's or map's item, and `key` a map's key.
Val = namedtuple("Val", "kind size schema item key", defaults=(None, None, None))

# CEL's names of the types, for messages.
TYPE_NAMES = {"null": "null_type", "duration": "google.protobuf.Duration",
              "timestamp": "google.protobuf.Timestamp"}
NUMBERS = ("int", "uint", "double")
ORDERED = NUMBERS + ("bool", "string", "bytes", "duration", "timestamp")


def scalar(kind):
    return Val(kind, 1)


BOOL, INT, DYN = scalar("bool"), scalar("int"), scalar("dyn")


def type_name(val):
    if val.kind == "list":
        return f"list({type_name(val.item)})"
    if val.kind == "map":
        return f"map({type_name(val.key)}, {type_name(val.item)})"
    if val.kind == "any":
        return "dyn"
    return TYPE_NAMES.get(val.kind, val.kind)


def no_overload(function, *args, target=None):
    names = ", ".join(type_name(a) for a in args)
    applied = f"{type_name(target)}.({names})" if target is not None else f"({names})"
    return IllTyped(f"found no matching overload for '{function}' applied to '{applied}'")


def factor(size, per_unit):
    return math.ceil(size * per_unit)


def schema_val(schema, resource_root=False):
    """The value a schema node holds as the API server declares it to CEL, with the size it
    estimates for it; None for a node it does not expose (no type, or a list or map of such)."""
    if schema.get("x-kubernetes-int-or-string"):
        size = schema["maxLength"] * 4 if "maxLength" in schema else REQUEST_BYTES
        return Val("dyn", size, schema)
    if resource_root or schema.get("x-kubernetes-embedded-resource"):
        schema = with_type_and_object_meta(schema)
    kind = schema.get("type")
    if kind == "string":
        if "maxLength" in schema:
            # maxLength counts characters; the API server counts up to 4 bytes each.
            size = schema["maxLength"] * 4
        elif "enum" in schema:
            size = max(len(str(v).encode()) for v in schema["enum"])
        else:
            size = REQUEST_BYTES
        cel_kind = {"byte": "bytes", "duration": "duration", "date": "timestamp",
                    "date-time": "timestamp"}.get(schema.get("format"), "string")
        return Val(cel_kind, size if cel_kind in ("string", "bytes") else 1, schema)
    if kind == "array":
        item = schema_val(schema.get("items") or {})
        if item is None:
            return None
        return Val("list", items_bound(schema, "maxItems", schema.get("items") or {}), schema, item)
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        item = schema_val(schema["additionalProperties"])
        if item is None:
            return None
        return Val("map", items_bound(schema, "maxProperties", schema["additionalProperties"]), schema,
                   item, Val("string", REQUEST_BYTES))
    if kind == "object":
        return Val("object", 1, schema)
    return {"boolean": BOOL, "integer": INT, "number": scalar("double")}.get(kind)


def with_type_and_object_meta(schema):
    """A resource's root, or an embedded resource: `apiVersion`, `kind` and `metadata`'s `name`
    and `generateName` declared, as the API server always declares them there."""
    props = schema.get("properties") or {}
    meta = props.get("metadata") or {}
    if (all((props.get(k) or {}).get("type") == "string" for k in ("kind", "apiVersion"))
            and meta.get("type") == "object"
            and all(((meta.get("properties") or {}).get(k) or {}).get("type") == "string"
                    for k in ("name", "generateName"))):
        return schema
    string = {"type": "string"}
    return dict(schema, properties=dict(props, kind=string, apiVersion=string, metadata={
        "type": "object", "properties": {"name": string, "generateName": string}}))


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
        return Val(kind, len(value))
    kinds = {"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double", "BOOL_LIT": "bool",
             "NULL_LIT": "null"}
    if token.type not in kinds:
        raise Unmodelled(f"a literal of type {token.type}")
    return scalar(kinds[token.type])


def unify(a, b):
    """The type two values share, as cel-go binds one type parameter to both (dyn takes any type,
    and so do an empty literal's items), with the larger size; None when they share none."""
    if a.kind == "any":
        return b
    if b.kind == "any":
        return a
    big = larger(a, b)
    if "dyn" in (a.kind, b.kind):
        return big._replace(kind="dyn", item=None, key=None)
    if a.kind != b.kind or (a.kind == "object" and a.schema is not b.schema):
        return None
    if a.kind in ("list", "map"):
        item = unify(a.item, b.item)
        key = unify(a.key, b.key) if a.kind == "map" else None
        if item is None or (a.kind == "map" and key is None):
            return None
        return big._replace(item=item, key=key)
    return big


def is_a(val, *kinds):
    """Whether `val` is of one of `kinds` or dyn, which the checker takes for any."""
    return val.kind in kinds + ("dyn",)


# Conversions: the kinds each takes and the kind it gives (its cost: 1, or walking a string).
CONVERSIONS = {
    "int": (("int", "uint", "double", "string", "timestamp"), "int"),
    "uint": (("int", "uint", "double", "string"), "uint"),
    "double": (("int", "uint", "double", "string"), "double"),
    "bool": (("bool", "string"), "bool"),
    "string": (("int", "uint", "double", "bool", "string", "bytes", "duration", "timestamp"), "string"),
    "bytes": (("string", "bytes"), "bytes"),
    "duration": (("string", "duration"), "duration"),
    "timestamp": (("string", "timestamp", "int"), "timestamp"),
}
# The identifiers that name a type, usable as values (`type(self.x) == string`).
TYPE_IDENTS = {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
# The string methods of one string argument that answer a bool. `startsWith` and `endsWith` walk
# the argument, `contains` one string for each character of the other, and `matches` the string
# for each character of its regular expression.
STRING_TESTS = {"startsWith", "endsWith", "contains", "matches"}
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


class Checker:
    """The type and the estimated cost of one expression over the variables of `scope` (name to
    value). A name of `unmodelled` is declared by the API server but not by the model."""

    def __init__(self, scope, unmodelled=()):
        self.scope = dict(scope)
        self.unmodelled = set(unmodelled)

    def cost(self, node):
        """(largest cost, value) of a parse-tree node; raises IllTyped where cel-go would."""
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
        (cond, cond_val), (then, then_val), (other, other_val) = (self.cost(k) for k in kids)
        both = unify(then_val, other_val)
        if not is_a(cond_val, "bool") or both is None:
            raise no_overload("_?_:_", cond_val, then_val, other_val)
        return cond + max(then, other), both

    def on_conditionalor(self, kids):
        return self.logical("_||_", kids)

    def on_conditionaland(self, kids):
        return self.logical("_&&_", kids)

    def logical(self, function, kids):
        if len(kids) == 1:
            return self.cost(kids[0])
        (lhs, lhs_val), (rhs, rhs_val) = self.cost(kids[0]), self.cost(kids[1])
        if not (is_a(lhs_val, "bool") and is_a(rhs_val, "bool")):
            raise no_overload(function, lhs_val, rhs_val)
        return lhs + rhs, BOOL

    def on_relation(self, kids):
        if len(kids) != 2:
            return self.cost(kids[0])
        # The operator around its left operand, then the right one.
        op = rule_name(kids[0])
        (lhs, lhs_val), (rhs, rhs_val) = self.cost(kids[0].children[0]), self.cost(kids[1])
        function = {"relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_",
                    "relation_ge": "_>=_", "relation_eq": "_==_", "relation_ne": "_!=_",
                    "relation_in": "@in"}[op]
        if op == "relation_in":
            if rhs_val.kind == "dyn":
                return lhs + rhs + 1, BOOL
            if rhs_val.kind not in ("list", "map"):
                raise no_overload(function, lhs_val, rhs_val)
            member = rhs_val.item if rhs_val.kind == "list" else rhs_val.key
            if unify(lhs_val, member) is None:
                raise no_overload(function, lhs_val, rhs_val)
            walk = rhs_val.size if rhs_val.kind == "list" else 1
            return lhs + rhs + walk, BOOL
        both = unify(lhs_val, rhs_val)
        ordered = op in ("relation_eq", "relation_ne") or (both is not None and is_a(both, *ORDERED))
        if both is None or not ordered:
            raise no_overload(function, lhs_val, rhs_val)
        if op in ("relation_eq", "relation_ne") or lhs_val.kind in ("string", "bytes"):
            return lhs + rhs + factor(min(lhs_val.size, rhs_val.size), STRING_TRAVERSAL), BOOL
        return lhs + rhs + 1, BOOL

    def on_addition(self, kids):
        if len(kids) != 2:
            return self.cost(kids[0])
        op = rule_name(kids[0])
        (lhs, lhs_val), (rhs, rhs_val) = self.cost(kids[0].children[0]), self.cost(kids[1])
        function = "_+_" if op == "addition_add" else "_-_"
        kinds = (lhs_val.kind, rhs_val.kind)
        if "dyn" in kinds:
            return lhs + rhs + 1, larger(lhs_val, rhs_val)._replace(kind="dyn", item=None, key=None)
        if op == "addition_add" and kinds in (("string", "string"), ("bytes", "bytes")):
            size = lhs_val.size + rhs_val.size
            return lhs + rhs + factor(size, STRING_TRAVERSAL), Val(lhs_val.kind, size)
        if op == "addition_add" and kinds == ("list", "list"):
            item = unify(lhs_val.item, rhs_val.item)
            if item is None:
                raise no_overload(function, lhs_val, rhs_val)
            return lhs + rhs + 1, Val("list", lhs_val.size + rhs_val.size, None, item)
        results = {("duration", "duration"): "duration", ("timestamp", "duration"): "timestamp"}
        if op == "addition_add":
            results[("duration", "timestamp")] = "timestamp"
        else:
            results[("timestamp", "timestamp")] = "duration"
        if kinds[0] == kinds[1] and kinds[0] in NUMBERS:
            return lhs + rhs + 1, scalar(kinds[0])
        if kinds in results:
            return lhs + rhs + 1, scalar(results[kinds])
        raise no_overload(function, lhs_val, rhs_val)

    def on_multiplication(self, kids):
        if len(kids) != 2:
            return self.cost(kids[0])
        op = rule_name(kids[0])
        (lhs, lhs_val), (rhs, rhs_val) = self.cost(kids[0].children[0]), self.cost(kids[1])
        function = {"multiplication_mul": "_*_", "multiplication_div": "_/_",
                    "multiplication_mod": "_%_"}[op]
        numbers = ("int", "uint") if op == "multiplication_mod" else NUMBERS
        if "dyn" in (lhs_val.kind, rhs_val.kind):
            return lhs + rhs + 1, DYN
        if lhs_val.kind != rhs_val.kind or lhs_val.kind not in numbers:
            raise no_overload(function, lhs_val, rhs_val)
        return lhs + rhs + 1, scalar(lhs_val.kind)

    def on_unary(self, kids):
        if len(kids) != 2:
            return self.cost(kids[0])
        # unary_not or unary_neg, then the operand
        operand, val = self.cost(kids[1])
        if rule_name(kids[0]) == "unary_not":
            if not is_a(val, "bool"):
                raise no_overload("!_", val)
            return operand + 1, BOOL
        if not is_a(val, "int", "double"):
            raise no_overload("-_", val)
        return operand + 1, scalar(val.kind)

    def on_paren_expr(self, kids):
        return self.cost(kids[0])

    def on_literal(self, kids):
        return 0, literal_val(kids[0])

    def on_ident(self, kids):
        name = str(kids[0])
        if name in self.scope:
            return 1, self.scope[name]
        if name in TYPE_IDENTS:
            return 1, scalar("type")
        if name in self.unmodelled:
            raise Unmodelled(f"the identifier {name}")
        raise IllTyped(f"undeclared reference to '{name}'")

    def on_member_dot(self, kids):
        operand, val = self.cost(kids[0])
        return operand + (1 if val.kind in ("object", "map") else 0), field_val(val, str(kids[1]))

    def on_member_index(self, kids):
        (target, val), (index, index_val) = self.cost(kids[0]), self.cost(kids[1])
        if val.kind == "dyn":
            item = DYN
        elif val.kind == "list" and is_a(index_val, "int"):
            item = val.item
        elif val.kind == "map" and unify(val.key, index_val) is not None:
            item = val.item
        else:
            raise no_overload("_[_]", val, index_val)
        return target + index + 1, item

    def on_list_lit(self, kids):
        items = [self.cost(k) for k in (kids[0].children if kids else [])]
        item = self.homogeneous([val for _, val in items])
        return sum(c for c, _ in items) + LIST_CREATE, Val("list", len(items), None, item)

    def on_map_lit(self, kids):
        entries = [self.cost(k) for k in (kids[0].children if kids else [])]
        keys, values = [val for _, val in entries[0::2]], [val for _, val in entries[1::2]]
        key, item = self.homogeneous(keys), self.homogeneous(values)
        if not is_a(key, "any", "string", "int", "uint", "bool"):
            raise IllTyped(f"unsupported map key type: {type_name(key)}")
        return sum(c for c, _ in entries) + MAP_CREATE, Val("map", len(values), None, item, key)

    @staticmethod
    def homogeneous(vals):
        """The one type of a literal's items (the API server's environment has homogeneous
        aggregate literals), with the largest size."""
        item = Val("any", 0)
        for val in vals:
            joined = unify(item, val)
            if joined is None:
                raise IllTyped(f"type mismatch: {type_name(val)} in a literal of {type_name(item)}")
            item = joined
        return item

    def on_ident_arg(self, kids):
        name = str(kids[0])
        args = kids[1].children if len(kids) > 1 else []
        if name == "has":
            # has(x.f): the presence test and x. The test counts one unit here; the API server's
            # environment counts none (cel-go's PresenceTestHasCost(false)). Selecting f checks
            # that x declares it.
            select = find_member_dot(args[0])
            operand, val = self.cost(select.children[0])
            field_val(val, str(select.children[1]))
            return operand + 1, BOOL
        costs = [self.cost(a) for a in args]
        total = sum(c for c, _ in costs)
        vals = [val for _, val in costs]
        if name == "size":
            if len(vals) != 1 or not is_a(vals[0], "string", "bytes", "list", "map"):
                raise no_overload("size", *vals)
            return total + 1, INT
        if name == "dyn" and len(vals) == 1:
            return total + 1, vals[0]._replace(kind="dyn", item=None, key=None)
        if name == "type" and len(vals) == 1:
            return total + 1, scalar("type")
        if name in CONVERSIONS:
            takes, gives = CONVERSIONS[name]
            if len(vals) != 1 or not is_a(vals[0], *takes):
                raise no_overload(name, *vals)
            if name in ("bytes", "string") and vals[0].kind in ("string", "bytes"):
                # One walk of the string; a character may take four bytes.
                size = vals[0].size * (4 if name == "bytes" else 1)
                return total + factor(vals[0].size, STRING_TRAVERSAL), Val(gives, size)
            return total + 1, scalar(gives)
        raise Unmodelled(f"the function {name}()")

    def on_member_dot_arg(self, kids):
        name = str(kids[1])
        args = kids[2].children if len(kids) > 2 else []
        if name in MACROS:
            return self.macro(name, kids[0], args)
        target, target_val = self.cost(kids[0])
        costs = [self.cost(a) for a in args]
        total = target + sum(c for c, _ in costs)
        vals = [val for _, val in costs]
        if name in STRING_TESTS:
            if len(vals) != 1 or not (is_a(target_val, "string") and is_a(vals[0], "string")):
                raise no_overload(name, *vals, target=target_val)
            if name == "contains":
                walk = factor(target_val.size, STRING_TRAVERSAL) * factor(vals[0].size, STRING_TRAVERSAL)
            elif name == "matches":
                # One more character of the string, so that an empty one still costs the regex.
                walk = factor(target_val.size + 1, STRING_TRAVERSAL) * factor(vals[0].size, REGEX_LENGTH)
            else:
                walk = factor(vals[0].size, STRING_TRAVERSAL)
            return total + walk, BOOL
        if name == "size":
            if vals or not is_a(target_val, "string", "bytes", "list", "map"):
                raise no_overload(name, *vals, target=target_val)
            return total + 1, INT
        raise Unmodelled(f"the method {name}()")

    def macro(self, name, target_node, args):
        if len(args) != 2:
            raise Unmodelled(f"the macro {name} with {len(args)} arguments")
        start, result, per_item = MACROS[name]
        target, val = self.cost(target_node)
        if val.kind == "dyn":
            # A dyn value's items are dyn, as many as the smallest value fits in a request.
            val = Val("list", REQUEST_BYTES // 2, None, DYN)
        if val.kind not in ("list", "map"):
            raise IllTyped(f"expression of type '{type_name(val)}' cannot be range of a comprehension")
        var = str(find_ident(args[0]))
        # A map's macros range over its keys.
        item = val.item if val.kind == "list" else val.key
        outer = self.scope.get(var)
        self.scope[var] = item
        try:
            predicate, predicate_val = self.cost(args[1])
        finally:
            if outer is None:
                del self.scope[var]
            else:
                self.scope[var] = outer
        results = {"map": Val("list", val.size, None, predicate_val), "filter": Val("list", val.size, None, item)}
        if name != "map" and not is_a(predicate_val, "bool"):
            # As the comprehension the parser expands the macro into calls it.
            step = {"all": ("_&&_", BOOL, predicate_val), "exists": ("_||_", BOOL, predicate_val),
                    "exists_one": ("_?_:_", predicate_val, INT, INT),
                    "filter": ("_?_:_", predicate_val, results["filter"], results["filter"])}[name]
            raise no_overload(*step)
        # The comprehension's range, its start and result, and each item's loop.
        return target + start + result + val.size * (per_item + predicate), results.get(name, BOOL)


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
    """The value of field `name` of `val`, as cel-go's checker types a selection."""
    if val.kind == "dyn":
        return Val("dyn", REQUEST_BYTES)
    if val.kind == "map" and is_a(val.key, "string"):
        return val.item
    if val.kind != "object":
        raise IllTyped(f"type '{type_name(val)}' does not support field selection")
    prop = (val.schema.get("properties") or {}).get(name)
    field = schema_val(prop) if prop is not None else None
    if field is None:
        raise IllTyped(f"undefined field '{name}'")
    return field


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
        raise IllTyped("invalid argument to has() macro")
    return found


def find_ident(node):
    found = find(node, "ident")
    if found is None:
        raise IllTyped("argument must be a simple name")
    return found.children[0]


def bool_cost(parse_tree, scope, unmodelled=()):
    """The largest cost of one evaluation of an expression that the API server requires to be a
    bool; raises IllTyped if its type is any other (dyn included, as cel-go's exact check)."""
    cost, val = Checker(scope, unmodelled).cost(parse_tree)
    if val.kind != "bool":
        raise IllTyped(f"must evaluate to bool but got {type_name(val)}")
    return cost


def rule_cost(parse_tree, self_schema, resource_root=False):
    """The largest cost of one evaluation of a rule declared on `self_schema`, type-checked."""
    self_val = schema_val(self_schema, resource_root)
    if self_val is None:
        raise IllTyped("rule declared on a schema that does not support validation rules")
    return bool_cost(parse_tree, {"self": self_val}, unmodelled={"oldSelf"})


def crd_rule_costs(schema, compile_rule, at="", cardinality=1):
    """(where, rule, cost of one evaluation, evaluations in one object at most) of every rule
    of a CRD schema, each type-checked (IllTyped or Unmodelled name where the rule is). Below a
    list or map without a bound, the API server counts a value as often as the smallest one of
    its type fits in a request (`cardinality` None until then)."""
    times = cardinality
    if times is None:
        times = REQUEST_BYTES // (MIN_ITEM_BYTES.get(schema.get("type"), 1) + 1)
    where = at or "."
    found = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "messageExpression" in rule:
            raise Unmodelled(f"{where}: a messageExpression, which the API server checks too")
        try:
            found.append((where, rule["rule"], rule_cost(compile_rule(rule["rule"]), schema, not at), times))
        except (IllTyped, Unmodelled) as e:
            raise type(e)(f"{where}: {e}: {rule['rule']}") from None
    for key, sub in (schema.get("properties") or {}).items():
        found += crd_rule_costs(sub, compile_rule, f"{at}.{key}", cardinality)
    for key, bound, mark in (("items", "maxItems", "[*]"), ("additionalProperties", "maxProperties", "{*}")):
        sub = schema.get(key)
        if isinstance(sub, dict):
            below = None if cardinality is None or bound not in schema else cardinality * schema[bound]
            found += crd_rule_costs(sub, compile_rule, at + mark, below)
    return found


def object_schema(**properties):
    return {"type": "object", "properties": properties}


# The type the API server declares for a webhook's `request` variable (AdmissionRequest, but its
# uid, object and oldObject), as a schema; `options` is dyn, which int-or-string declares.
STRING = {"type": "string"}
GROUP_VERSION = {"group": STRING, "version": STRING}
ADMISSION_REQUEST = object_schema(
    kind=object_schema(kind=STRING, **GROUP_VERSION),
    resource=object_schema(resource=STRING, **GROUP_VERSION),
    subResource=STRING,
    requestKind=object_schema(kind=STRING, **GROUP_VERSION),
    requestResource=object_schema(resource=STRING, **GROUP_VERSION),
    requestSubResource=STRING,
    name=STRING,
    namespace=STRING,
    operation=STRING,
    userInfo=object_schema(
        username=STRING, uid=STRING, groups={"type": "array", "items": STRING},
        extra={"type": "object", "additionalProperties": {"type": "array", "items": STRING}}),
    dryRun={"type": "boolean"},
    options={"x-kubernetes-int-or-string": True},
)


def match_condition_check(parse_tree):
    """Type-checks a webhook's match condition as the API server does when it creates the
    configuration: `object` and `oldObject` dyn, `request` an AdmissionRequest, a bool result."""
    scope = {"object": DYN, "oldObject": DYN, "request": schema_val(ADMISSION_REQUEST)}
    bool_cost(parse_tree, scope, unmodelled={"authorizer", "namespaceObject"})


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
COST_SELF_TEST = [
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

# Schemas of Kubernetes' TestValidationExpressions (apiextensions-apiserver, schema/cel), each the
# `self` of the cases below.
INTEGER, NUMBER, BOOLEAN = {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
UNTYPED = {"x-kubernetes-preserve-unknown-fields": True}
OBJECT_ACCESS = object_schema(
    a=object_schema(b=INTEGER, c=INTEGER, d=dict(INTEGER, nullable=True)),
    a1=object_schema(b1=object_schema(c1=INTEGER), d2=object_schema(e2=INTEGER)))
MAP_ACCESS = object_schema(val={"type": "object", "additionalProperties": INTEGER})
LIST_MAP = object_schema(listMap=array_schema(object_schema(k=STRING, v=STRING, v2=STRING)))
OBJECTS = object_schema(objs=array_schema(object_schema(f1=STRING, f2=STRING)))
LISTS = object_schema(val1=array_schema(INTEGER), array=array_schema(INTEGER))
CONVERSION = object_schema(
    val1=INTEGER, val2=NUMBER, val5=BOOLEAN, val6=STRING, val7=dict(STRING, format="byte"),
    val8=STRING, val9=dict(STRING, format="duration"), val10=STRING,
    val11=dict(STRING, format="date-time"))
INT_OR_STRING = object_schema(something={"x-kubernetes-int-or-string": True})
UNKNOWN = object_schema(
    withUnknown=dict(UNTYPED, type="object"), anyvalList=array_schema(UNTYPED),
    anyvalMap={"type": "object", "additionalProperties": UNTYPED}, anyvalField1=UNTYPED)
EMBEDDED = object_schema(embedded={"type": "object", "x-kubernetes-embedded-resource": True})

# Their cases: (rule, the schema of self, None where Kubernetes expects the rule to compile, else
# what its compile error says). The model must type each alike.
TYPE_SELF_TEST = [
    ("has(self.a.b)", OBJECT_ACCESS, None),
    ("!(has(self.a1.d2) && has(self.a1.d2.e2))", OBJECT_ACCESS, None),
    ("has(self.a.z)", OBJECT_ACCESS, "undefined field 'z'"),
    ("self.a['b'] == 1", OBJECT_ACCESS, "no matching overload for '_[_]'"),
    ("!has(self.val.a)", MAP_ACCESS, None),
    ("self.val.all(k, self.val[k] > 0)", MAP_ACCESS, None),
    ("self.val.exists_one(k, self.val[k] == 2)", MAP_ACCESS, None),
    ("self.val.map(k, self.val[k]).exists(v, v == 1)", MAP_ACCESS, None),
    ("size(self.val.filter(k, self.val[k] > 1)) == 1", MAP_ACCESS, None),
    ("self.listMap.all(m, !has(m.v2) || m.v2 == 'z')", LIST_MAP, None),
    ("self.listMap.filter(m, has(m.v2) && m.v2 == 'z').size() == 1", LIST_MAP, None),
    ("self.objs[0] == self.objs[1]", OBJECTS, None),
    ("self.objs[0] == {'f1': 'a', 'f2': 'b'}", OBJECTS, "found no matching overload for '_==_'"),
    ("1 in self.val1", LISTS, None),
    ("self.val1 + [4, 5] == [1, 2, 3, 4, 5]", LISTS, None),
    ("size(self.array.filter(e, e%2 == 0)) == 3", LISTS, None),
    ("int(self.val2) == self.val1", CONVERSION, None),
    ("double(self.val1) == self.val2", CONVERSION, None),
    ("bytes(self.val6) == self.val7", CONVERSION, None),
    ("string(self.val5) == 'true'", CONVERSION, None),
    ("duration(self.val8) == self.val9", CONVERSION, None),
    ("timestamp(self.val10) == self.val11", CONVERSION, None),
    ("type(self.val1) == int", CONVERSION, None),
    ("type(self.something) == int ? self.something == 1 : self.something == '25%'", INT_OR_STRING, None),
    ("self.something == ['anything']", INT_OR_STRING, None),
    ("has(self.withUnknown)", UNKNOWN, None),
    ("has(self.withUnknown.field1)", UNKNOWN, "undefined field 'field1'"),
    ("has(self.anyvalList)", UNKNOWN, "undefined field 'anyvalList'"),
    ("has(self.anyvalMap)", UNKNOWN, "undefined field 'anyvalMap'"),
    ("has(self.anyvalField1)", UNKNOWN, "undefined field 'anyvalField1'"),
    ("self.embedded.metadata.name == 'foo'", EMBEDDED, None),
    ("has(self.embedded.spec)", EMBEDDED, "undefined field 'spec'"),
    ("has(self.embedded.metadata.namespace)", EMBEDDED, "undefined field 'namespace'"),
]


def self_test(compile_rule):
    """The cases of COST_SELF_TEST and TYPE_SELF_TEST the model does not check as Kubernetes
    does, as messages."""
    wrong = []
    for rule, schema, expected in COST_SELF_TEST:
        got = rule_cost(compile_rule(rule), schema)
        if got != expected:
            wrong.append(f"{rule!r} on {schema}: the model estimates {got}, Kubernetes {expected}")
    for rule, schema, expected in TYPE_SELF_TEST:
        try:
            rule_cost(compile_rule(rule), schema)
            got = None
        except IllTyped as e:
            got = str(e)
        if (got is None) != (expected is None) or (expected is not None and expected not in got):
            wrong.append(f"{rule!r}: the model says {got or 'it compiles'}, Kubernetes "
                         f"{expected or 'it compiles'}")
    return wrong
