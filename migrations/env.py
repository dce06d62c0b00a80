import logging
import time
from logging.config import fileConfig

from flask import current_app

from webapp.db import is_sqlite_url
from webapp.ops.release import runner

from alembic import context

# this is the Alembic Config object, which provides
# access to the values within the .ini file in use.
config = context.config

# Interpret the config file for Python logging.
# This line sets up loggers basically.
fileConfig(config.config_file_name, disable_existing_loggers=False)
logger = logging.getLogger('alembic.env')


def get_engine():
    # the app's engine, or the direct URL's behind a pooler (webapp/ops/release/runner.py)
    return runner.engine_for(current_app)


def get_engine_url():
    return get_engine().url.render_as_string(hide_password=False).replace('%', '%%')


# add your model's MetaData object here
# for 'autogenerate' support
# from myapp import mymodel
# target_metadata = mymodel.Base.metadata
config.set_main_option('sqlalchemy.url', get_engine_url())
target_db = current_app.extensions['migrate'].db

# other values from the config, defined by the needs of env.py,
# can be acquired:
# my_important_option = config.get_main_option("my_important_option")
# ... etc.


def get_metadata():
    if hasattr(target_db, 'metadatas'):
        return target_db.metadatas[None]
    return target_db.metadata


def run_migrations_offline():
    """Run migrations in 'offline' mode.

    This configures the context with just a URL
    and not an Engine, though an Engine is acceptable
    here as well.  By skipping the Engine creation
    we don't even need a DBAPI to be available.

    Calls to context.execute() here emit the given string to the
    script output.

    """
    url = config.get_main_option("sqlalchemy.url")
    context.configure(
        url=url, target_metadata=get_metadata(), literal_binds=True,
        transaction_per_migration=True,
    )
    if not is_sqlite_url(url):
        # the limits the online run sets on its session (webapp/ops/release/runner.py)
        for statement in runner.Limits.of(current_app.config).session_sql():
            context.execute(statement)

    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    """Run migrations in 'online' mode.

    In this scenario we need to create an Engine
    and associate a connection with the context.

    """

    # this callback is used to prevent an auto-migration from being generated
    # when there are no changes to the schema
    # reference: http://alembic.zzzcomputing.com/en/latest/cookbook.html
    def process_revision_directives(context, revision, directives):
        if getattr(config.cmd_opts, 'autogenerate', False):
            script = directives[0]
            if script.upgrade_ops.is_empty():
                directives[:] = []
                logger.info('No changes in schema detected.')

    conf_args = current_app.extensions['migrate'].configure_args
    if conf_args.get("process_revision_directives") is None:
        conf_args["process_revision_directives"] = process_revision_directives

    connectable = get_engine()
    # `flask --app webapp release` measures the release (webapp/ops/release/report.py)
    recorder = config.attributes.get("recorder")

    with connectable.connect() as connection:
        if recorder is not None:
            recorder.attach(connection)
        # each migration in a transaction of its own, never all in one: a lock is held
        # until its migration commits, not until the last one does
        context.configure(
            connection=connection,
            target_metadata=get_metadata(),
            transaction_per_migration=True,
            on_version_apply=[recorder.applied] if recorder is not None else [],
            **conf_args
        )
        # a short lock_timeout, retries with back-off (PostgreSQL; SQLite runs them once)
        runner.run(context, runner.Limits.of(current_app.config), time.sleep, recorder)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
