"""The management XML codec: the SDK's captured request bodies in, responses the SDK's own models read."""

from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest
from azure.servicebus.management._generated.models import (
    QueueDescriptionEntry,
    QueueDescriptionFeed,
    RuleDescriptionEntry,
    ServiceBusManagementError,
    SubscriptionDescriptionEntry,
    TopicDescriptionEntry,
)
from azure.servicebus.management._models import (
    QueueProperties as SdkQueueProperties,
)
from azure.servicebus.management._models import (
    QueueRuntimeProperties,
    TopicRuntimeProperties,
)
from azure.servicebus.management._models import (
    RuleProperties as SdkRuleProperties,
)
from azure.servicebus.management._utils import deserialize_rule_key_values
from proton import float32, int32, symbol, ulong

from local_broker.engine import (
    TIMESPAN_MAX,
    ArgumentError,
    CorrelationFilter,
    EntityStatus,
    FalseFilter,
    QueueProperties,
    RuleProperties,
    RuntimeProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
    TrueFilter,
)
from local_broker.wire.admin import atom, descriptions, rule_codec
from local_broker.wire.admin.operations import _entity_entry, parse_target

HEAD = ('<?xml version=\'1.0\' encoding=\'utf-8\'?>\n<ns0:entry xmlns:ns0="http://www.w3.org/2005/Atom" '
        'xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ns0:content type="application/xml">')
TAIL = "</ns0:content></ns0:entry>"
XSD = 'xmlns:d6p1="http://www.w3.org/2001/XMLSchema"'

# Request bodies exactly as azure-servicebus 7.15.0 sends them (servicebus-wire.md 11.5).
QUEUE_ALL_OPTIONS = (
    HEAD + "<QueueDescription><LockDuration>PT30S</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes>"
    "<RequiresDuplicateDetection>true</RequiresDuplicateDetection><RequiresSession>false</RequiresSession>"
    "<DefaultMessageTimeToLive>P1D</DefaultMessageTimeToLive>"
    "<DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration>"
    "<DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow>"
    "<MaxDeliveryCount>5</MaxDeliveryCount><AutoDeleteOnIdle>PT1H</AutoDeleteOnIdle>"
    "<EnablePartitioning>false</EnablePartitioning><ForwardTo>sb://127.0.0.1:5300/q2</ForwardTo>"
    "<UserMetadata>meta</UserMetadata><ForwardDeadLetteredMessagesTo>sb://127.0.0.1:5300/q3"
    "</ForwardDeadLetteredMessagesTo></QueueDescription>" + TAIL
)
QUEUE_UPDATE = (
    HEAD + "<QueueDescription><LockDuration>PT1M</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes>"
    "<RequiresDuplicateDetection>false</RequiresDuplicateDetection><RequiresSession>false</RequiresSession>"
    "<DefaultMessageTimeToLive>P10675199DT2H48M5.477539S</DefaultMessageTimeToLive>"
    "<DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration>"
    "<DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow>"
    "<MaxDeliveryCount>7</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations>"
    "<SizeInBytes>512</SizeInBytes><MessageCount>6</MessageCount><IsAnonymousAccessible>false</IsAnonymousAccessible>"
    "<Status>Active</Status><CreatedAt>2024-01-01T00:00:00.000Z</CreatedAt><UpdatedAt>2024-01-01T00:00:00.000Z"
    "</UpdatedAt><AccessedAt>0001-01-01T00:00:00.000Z</AccessedAt><SupportOrdering>true</SupportOrdering>"
    '<CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus">'
    "<d2p1:ActiveMessageCount>3</d2p1:ActiveMessageCount></CountDetails>"
    "<AutoDeleteOnIdle>P10675199DT2H48M5.477539S</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning>"
    "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableExpress>false</EnableExpress>"
    "<ForwardDeadLetteredMessagesTo>sb://127.0.0.1:5300/q3</ForwardDeadLetteredMessagesTo>"
    "<MaxMessageSizeInKilobytes>256</MaxMessageSizeInKilobytes></QueueDescription>" + TAIL
)
SQL_RULE = (
    HEAD + '<RuleDescription><Filter xsi:type="SqlFilter"><SqlExpression>color = @c</SqlExpression>'
    "<CompatibilityLevel>20</CompatibilityLevel><Parameters><KeyValueOfstringanyType><Key>@c</Key>"
    f'<Value xsi:type="d6p1:string" {XSD}>red</Value></KeyValueOfstringanyType><KeyValueOfstringanyType>'
    f'<Key>@n</Key><Value xsi:type="d6p1:int" {XSD}>2</Value></KeyValueOfstringanyType></Parameters>'
    '<RequiresPreprocessing>true</RequiresPreprocessing></Filter><Action xsi:type="SqlRuleAction">'
    "<SqlExpression>SET a = 'b'</SqlExpression><CompatibilityLevel>20</CompatibilityLevel>"
    "<RequiresPreprocessing>true</RequiresPreprocessing></Action><Name>r1</Name></RuleDescription>" + TAIL
)
CORRELATION_RULE = (
    HEAD + '<RuleDescription><Filter xsi:type="CorrelationFilter"><CorrelationId>cid</CorrelationId>'
    "<MessageId>mid</MessageId><To>to</To><ReplyTo>rt</ReplyTo><Label>lbl</Label><SessionId>sess</SessionId>"
    "<ReplyToSessionId>rts</ReplyToSessionId><ContentType>ct</ContentType><Properties>"
    + "".join(f'<KeyValueOfstringanyType><Key>{k}</Key><Value xsi:type="d6p1:{t}" {XSD}>{v}</Value>'
              "</KeyValueOfstringanyType>"
              for k, t, v in [("k", "string", "v"), ("n", "int", "5"), ("b", "boolean", "true"),
                              ("f", "double", "1.5"), ("d", "dateTime", "2024-01-01T00:00:00+00:00"),
                              ("td", "duration", "PT5S"), ("big", "long", "4294967296")])
    + '</Properties></Filter><Action xsi:type="EmptyRuleAction" /><Name>r2</Name></RuleDescription>' + TAIL
)


def parse(body: str):
    return descriptions.parse_description(atom.parse_entry(body.encode()))


def test_queue_create_with_every_option():
    kind, values = parse(QUEUE_ALL_OPTIONS)
    assert kind == "QueueDescription"
    assert values == {
        "lock_duration": timedelta(seconds=30), "max_size_in_megabytes": 1024,
        "requires_duplicate_detection": True, "requires_session": False,
        "default_message_time_to_live": timedelta(days=1), "dead_lettering_on_message_expiration": True,
        "duplicate_detection_history_time_window": timedelta(minutes=10),
        "max_delivery_count": 5, "auto_delete_on_idle": timedelta(hours=1), "enable_partitioning": False,
        "forward_to": "q2", "user_metadata": "meta", "forward_dead_lettered_messages_to": "q3",
    }
    QueueProperties(name="q1", **values)  # every parsed key is an engine field


def test_minimal_create_has_no_values():
    assert parse(HEAD + "<QueueDescription /></ns0:content></ns0:entry>") == ("QueueDescription", {})


def test_update_ignores_read_only_elements_and_reads_max_value():
    _, values = parse(QUEUE_UPDATE)
    assert not {"size_in_bytes", "total_message_count", "created_at"} & set(values)
    assert values["default_message_time_to_live"] == TIMESPAN_MAX == values["auto_delete_on_idle"]
    assert values["status"] is EntityStatus.ACTIVE and values["max_delivery_count"] == 7
    assert "forward_to" not in values  # the SDK leaves an unset ForwardTo out
    assert set(values) <= set(descriptions.settable_attributes("QueueDescription"))
    QueueProperties(name="q1", **values)


def test_entity_authorization_rules_are_refused_not_dropped():
    assert parse(HEAD + "<QueueDescription><AuthorizationRules /></QueueDescription>" + TAIL) == (
        "QueueDescription", {})
    rule = ('<AuthorizationRules><AuthorizationRule xsi:type="SharedAccessAuthorizationRule"><ClaimType>'
            "SharedAccessKey</ClaimType><KeyName>reader</KeyName></AuthorizationRule></AuthorizationRules>")
    with pytest.raises(ArgumentError, match="authorization rules"):
        parse(HEAD + f"<QueueDescription>{rule}</QueueDescription>" + TAIL)


def test_topic_and_subscription_bodies():
    _, topic = parse(HEAD + "<TopicDescription><DefaultMessageTimeToLive>P1D</DefaultMessageTimeToLive>"
                     "<SupportOrdering>true</SupportOrdering><EnablePartitioning>true</EnablePartitioning>"
                     "</TopicDescription>" + TAIL)
    assert topic == {"default_message_time_to_live": timedelta(days=1), "support_ordering": True,
                     "enable_partitioning": True}
    kind, sub = parse(HEAD + "<SubscriptionDescription><LockDuration>PT45S</LockDuration>"
                      "<RequiresSession>true</RequiresSession><DeadLetteringOnFilterEvaluationExceptions>true"
                      "</DeadLetteringOnFilterEvaluationExceptions><MaxDeliveryCount>3</MaxDeliveryCount>"
                      "<ForwardTo>sb://127.0.0.1:5300/q1</ForwardTo></SubscriptionDescription>" + TAIL)
    assert kind == "SubscriptionDescription"
    assert sub == {"lock_duration": timedelta(seconds=45), "requires_session": True,
                   "dead_lettering_on_filter_evaluation_exceptions": True, "max_delivery_count": 3,
                   "forward_to": "q1"}


def test_subscription_default_rule_description():
    _, sub = parse(HEAD + '<SubscriptionDescription><DefaultRuleDescription><Filter xsi:type="SqlFilter">'
                   "<SqlExpression>a = 1</SqlExpression></Filter><Name>first</Name></DefaultRuleDescription>"
                   "</SubscriptionDescription>" + TAIL)
    assert sub["default_rule"] == RuleProperties(name="first", filter=SqlFilter("a = 1"), action=None)


@pytest.mark.parametrize(("element", "value", "attribute"), [
    ("MaxDeliveryCount", "many", "max_delivery_count"),
    ("LockDuration", "30 seconds", "lock_duration"),
    ("RequiresSession", "yes", "requires_session"),
    ("Status", "Sleeping", "status"),
])
def test_invalid_values_are_argument_errors_naming_the_property(element, value, attribute):
    with pytest.raises(ArgumentError) as caught:
        parse(HEAD + f"<QueueDescription><{element}>{value}</{element}></QueueDescription>" + TAIL)
    assert caught.value.property_name == attribute and element in caught.value.description


@pytest.mark.parametrize("body", [b"not xml", b"<feed xmlns='http://www.w3.org/2005/Atom'/>",
                                  (HEAD + TAIL).encode()])
def test_malformed_entries(body):
    with pytest.raises(ArgumentError):
        atom.parse_entry(body)


def test_sql_rule_with_parameters_and_action():
    rule = rule_codec.parse_rule(atom.parse_entry(SQL_RULE.encode()), default_name="r1")
    assert rule == RuleProperties(name="r1", filter=SqlFilter("color = @c", {"@c": "red", "@n": 2}),
                                  action=SqlRuleAction("SET a = 'b'", None))


def test_correlation_rule_with_every_field_and_value_type():
    rule = rule_codec.parse_rule(atom.parse_entry(CORRELATION_RULE.encode()), default_name="r2")
    assert rule.action is None
    assert rule.filter == CorrelationFilter(
        correlation_id="cid", message_id="mid", to="to", reply_to="rt", label="lbl", session_id="sess",
        reply_to_session_id="rts", content_type="ct",
        properties={"k": "v", "n": 5, "b": True, "f": 1.5, "d": datetime(2024, 1, 1, tzinfo=UTC),
                    "td": timedelta(seconds=5), "big": 4294967296})
    assert type(rule.filter.properties["n"]) is int and type(rule.filter.properties["b"]) is bool


@pytest.mark.parametrize(("kind", "expected"), [("TrueFilter", TrueFilter()), ("FalseFilter", FalseFilter())])
def test_boolean_filters(kind, expected):
    sql = "1=1" if kind == "TrueFilter" else "1=0"
    body = (HEAD + f'<RuleDescription><Filter xsi:type="{kind}"><SqlExpression>{sql}</SqlExpression>'
            '<CompatibilityLevel>20</CompatibilityLevel></Filter><Action xsi:type="EmptyRuleAction" />'
            "<Name>r3</Name></RuleDescription>" + TAIL)
    assert rule_codec.parse_rule(atom.parse_entry(body.encode()), default_name=None).filter == expected


def test_unknown_filter_type_and_bad_typed_value():
    with pytest.raises(ArgumentError, match="LikeFilter"):
        rule_codec.parse_rule(atom.parse_entry((HEAD + '<RuleDescription><Filter xsi:type="LikeFilter"/>'
                                                "</RuleDescription>" + TAIL).encode()), default_name="x")
    bad = CORRELATION_RULE.replace(">5<", ">five<")
    with pytest.raises(ArgumentError, match="'n'"):
        rule_codec.parse_rule(atom.parse_entry(bad.encode()), default_name="r2")


# --- responses, read back by the SDK's own models -----------------------------------------------------

BASE = "https://127.0.0.1:5300"
CREATED = datetime(2024, 1, 1, tzinfo=UTC)


def sdk_read(entry_class, payload: bytes):
    return entry_class.deserialize(ElementTree.fromstring(payload))


def queue_entry(**props):
    queue = QueueProperties(name="q1", created_at=CREATED, updated_at=CREATED, **props)
    runtime = RuntimeProperties(name="q1", active_message_count=3, dead_letter_message_count=1,
                                scheduled_message_count=2, transfer_dead_letter_message_count=4,
                                size_in_bytes=512, created_at=CREATED)
    return render(_entity_entry("QueueDescription", "q1", queue, runtime))


def render(entry):
    body = descriptions.render_description(entry.kind, entry.values)
    return atom.render_entry(BASE, entry.path, entry.title, body, entry.published, entry.updated, "primary")


def test_queue_entry_as_the_sdk_reads_it():
    payload = queue_entry(forward_to="q2", user_metadata="<meta & data>", lock_duration=timedelta(seconds=30),
                          enable_partitioning=True, status=EntityStatus.SEND_DISABLED)
    internal = sdk_read(QueueDescriptionEntry, payload).content.queue_description
    props = SdkQueueProperties._from_internal_entity("q1", internal)
    assert props.forward_to == "q2" and props.user_metadata == "<meta & data>"
    assert props.lock_duration == timedelta(seconds=30) and props.enable_partitioning is True
    assert props.status == "SendDisabled" and props.default_message_time_to_live >= TIMESPAN_MAX
    runtime = QueueRuntimeProperties._from_internal_entity("q1", internal)
    r = runtime
    counts = (r.active_message_count, r.dead_letter_message_count, r.scheduled_message_count,
              r.transfer_dead_letter_message_count, r.total_message_count, r.size_in_bytes)
    assert counts == (3, 1, 2, 4, 10, 512)
    assert runtime.created_at_utc == CREATED


def test_description_elements_follow_the_canonical_order():
    root = ElementTree.fromstring(queue_entry(forward_to="q2", user_metadata="m"))
    description = root.find(f"{{{atom.ATOM_NS}}}content")[0]
    order = [child.tag.removeprefix(f"{{{atom.SB_NS}}}") for child in description]
    canonical = [f.element for f in descriptions.QUEUE_FIELDS]
    assert order == [e for e in canonical if e in order]
    # never accessed: DateTime.MinValue, as Service Bus writes it (the JS SDK requires every timestamp)
    assert description.findtext(f"{{{atom.SB_NS}}}AccessedAt") == "0001-01-01T00:00:00Z"


def test_topic_entry_runtime():
    topic = TopicProperties(name="t1", created_at=CREATED, updated_at=CREATED)
    entry = _entity_entry("TopicDescription", "t1", topic,
                          RuntimeProperties(name="t1", scheduled_message_count=2, subscription_count=5))
    internal = sdk_read(TopicDescriptionEntry, render(entry)).content.topic_description
    runtime = TopicRuntimeProperties._from_internal_entity("t1", internal)
    assert runtime.subscription_count == 5 and runtime.scheduled_message_count == 2


def test_values_a_client_typed_over_amqp_render_as_numbers():
    """A rule added over AMQP keeps the client's types (proton's int32, long, float32): its ATOM reads 5."""
    rule = RuleProperties("typed", CorrelationFilter(properties={
        "n": int32(5), "big": ulong(1 << 40), "f": float32(0.5), "s": symbol("v")}), created_at=CREATED)
    payload = atom.render_entry(BASE, "t1/subscriptions/s1/rules/typed", "typed",
                                rule_codec.render_rule(rule), CREATED, CREATED, "primary")
    description = ElementTree.fromstring(payload).find(f"{{{atom.ATOM_NS}}}content")[0]
    assert rule_codec.parse_rule(description, default_name=None).filter.properties == {
        "n": 5, "big": 1 << 40, "f": 0.5, "s": "v"}


@pytest.mark.parametrize("rule", [
    RuleProperties("r1", SqlFilter("color = @c", {"@c": "red", "@n": 2, "@big": 2**40, "@t": True}),
                   SqlRuleAction("SET a = @v", {"@v": 1.5})),
    RuleProperties("r2", CorrelationFilter(correlation_id="cid", label="lbl", properties={
        "k": "v", "d": datetime(2024, 1, 1, tzinfo=UTC), "td": timedelta(seconds=5)})),
    RuleProperties("$Default", TrueFilter()),
    RuleProperties("never", FalseFilter()),
])
def test_rules_round_trip_through_the_sdk(rule):
    created = RuleProperties(rule.name, rule.filter, rule.action, created_at=CREATED)
    payload = atom.render_entry(BASE, f"t1/subscriptions/s1/rules/{rule.name}", rule.name,
                                rule_codec.render_rule(created), CREATED, CREATED, "primary")
    element = ElementTree.fromstring(payload)
    sdk_rule = SdkRuleProperties._from_internal_entity(
        rule.name, sdk_read(RuleDescriptionEntry, payload).content.rule_description)
    deserialize_rule_key_values(element, sdk_rule)
    assert sdk_rule.created_at_utc == CREATED
    # and our own reader gets the same rule back from what we wrote
    description = element.find(f"{{{atom.ATOM_NS}}}content")[0]
    assert rule_codec.parse_rule(description, default_name=None) == RuleProperties(rule.name, rule.filter,
                                                                                   rule.action)
    if isinstance(rule.filter, CorrelationFilter):
        assert sdk_rule.filter.properties == rule.filter.properties
    elif isinstance(rule.filter, SqlFilter):
        assert sdk_rule.filter.parameters == rule.filter.parameters
        assert sdk_rule.action.parameters == rule.action.parameters
    else:
        assert type(sdk_rule.filter).__name__ == type(rule.filter).__name__.replace("Filter", "RuleFilter")


def test_feed_paging_links_and_error_body():
    query = {"$skip": "0", "$top": "100", "api-version": "2024-05"}
    feed = atom.render_feed(BASE, "$Resources/Queues", "Queues", query, [queue_entry()], None, next_skip=100,
                            top=100)
    parsed = QueueDescriptionFeed.deserialize(ElementTree.fromstring(feed))
    assert len(parsed.entry) == 1 and len(parsed.link) == 2
    assert parsed.link[0].href == f"{BASE}/$Resources/Queues?$skip=0&$top=100&api-version=2024-05"
    assert parsed.link[1].href == f"{BASE}/$Resources/Queues?%24skip=100&%24top=100&api-version=2024-05"
    last_page = atom.render_feed(BASE, "x", "Queues", {}, [], None, None, 100)
    last = QueueDescriptionFeed.deserialize(ElementTree.fromstring(last_page))
    assert len(last.link) == 1 and not last.entry
    error = ServiceBusManagementError.deserialize(ElementTree.fromstring(atom.render_error(409, "a < b")))
    assert (error.code, error.detail) == (409, "a < b")


@pytest.mark.parametrize(("path", "expected"), [
    ("q1", ("entity", "q1", "", "")),
    ("a/b/c", ("entity", "a/b/c", "", "")),
    ("$Resources/Queues", ("queues", "", "", "")),
    ("$namespaceinfo", ("namespace", "", "", "")),
    ("t1/subscriptions", ("subscriptions", "t1", "", "")),
    ("t1/Subscriptions/s1", ("subscription", "t1", "s1", "")),
    ("t1/subscriptions/s1/rules", ("rules", "t1", "s1", "")),
    ("t1/subscriptions/s1/rules/$Default", ("rule", "t1", "s1", "$Default")),
])
def test_paths(path, expected):
    target = parse_target(path)
    assert (target.kind, target.topic, target.subscription, target.rule) == expected


def test_subscription_entry_reads():
    sub = SubscriptionProperties(name="s1", topic_name="t1", forward_to="q1", created_at=CREATED,
                                 updated_at=CREATED)
    entry = _entity_entry("SubscriptionDescription", "t1/subscriptions/s1", sub,
                          RuntimeProperties(name="s1", active_message_count=4))
    internal = sdk_read(SubscriptionDescriptionEntry, render(entry)).content.subscription_description
    assert internal.forward_to == "q1" and internal.message_count == 4
    assert internal.message_count_details.active_message_count == 4
