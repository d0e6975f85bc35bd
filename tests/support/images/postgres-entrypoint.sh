#!/bin/sh
# The first start of an empty PGDATA, as the official postgres image does it (the part deploy/compose.yaml uses):
# a UTF-8 cluster (psycopg reads text from a SQL_ASCII one as bytes), its superuser POSTGRES_USER with the
# password in POSTGRES_PASSWORD_FILE, reached over TCP with that password (scram-sha-256), and a database
# POSTGRES_DB. Later starts only run the command.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    initdb --username="$POSTGRES_USER" --pwfile="$POSTGRES_PASSWORD_FILE" --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec "$@"
