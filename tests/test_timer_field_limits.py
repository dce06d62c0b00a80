"""A timer field longer than its column holds is refused by name, with what was typed kept."""

import html

from tests.harness.support import TIMER, count, field_error, post_form, text
from webapp.models import Timer


def test_a_cron_expression_over_120_characters_is_refused_naming_the_field(app, client, auth):
    auth.login("editor")
    typed = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29," \
            "30,31,32,33,34,35,36,37,38,39,40,41 * * * *"
    assert len(typed) > 120
    response = post_form(client, "/admin/timers/new", {**TIMER, "kind": "cron", "cron": typed})
    assert response.status_code == 422
    assert "120" in field_error(text(response), "cron")
    assert typed in html.unescape(text(response))
    assert count(app, Timer) == 0


def test_a_long_cron_expression_is_refused_when_editing_too(app, client, auth):
    auth.login("editor")
    assert post_form(client, "/admin/timers/new", TIMER).status_code == 303
    typed = "*/5 " + "1," * 60 + "2 * * *"
    response = post_form(client, "/admin/timers/1/edit", {**TIMER, "kind": "cron", "cron": typed})
    assert response.status_code == 422
    assert field_error(text(response), "cron")
    assert typed in html.unescape(text(response))
