"""The member-list broker of a route: the one place of the rule the core and the operator reads share."""

from __future__ import annotations

from rocket_rebalance.route import QueueData, TopicRoute


def test_the_member_list_is_asked_of_the_routes_first_broker_in_the_name_servers_order() -> None:
    route = TopicRoute("T", (QueueData("broker-b", 0, 0, perm=0), QueueData("broker-a", 4, 4)))
    assert route.member_list_broker() == "broker-b"  # the first queue data, readable or not, not the smallest name
    assert route.without_brokers(["broker-b"]).member_list_broker() == "broker-a"
    assert TopicRoute("T", ()).member_list_broker() is None  # no broker: the fetch counts as failed
