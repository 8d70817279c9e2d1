#!/usr/bin/env bash
# Adds users to a mosquitto password file (mosquitto_passwd), named as deploy/mosquitto/acl expects:
#
#   passwords.sh FILE hub HUB_ID             a hub: the user name is its hub id ("hub-1")
#   passwords.sh FILE source ADDRESS         a playing device: "12:34:56:78:9A:BC" or "123456789abc" (user 123456789abc)
#   passwords.sh FILE bridge                 the bridge: user bridge.audio
#   passwords.sh FILE home-automation        home automation and Home Assistant: user home.automation
#   passwords.sh FILE remove USER            removes a user
#
# The password comes from the environment variable MQTT_PASSWORD; without it, a random one is made. Either way it
# goes to mosquitto_passwd on its standard input, never on a command line, and the script prints "USER PASSWORD"
# once, for the client's configuration: keep it there, it is not stored anywhere else (the file holds a salted
# PBKDF2-SHA512 hash). Adding a user who exists changes the password. The file is created, mode 0600, when missing.
# Then `kill -HUP` mosquitto to reload it.
#
#   deploy/mosquitto/passwords.sh /etc/mosquitto/audio/passwords bridge
#   MQTT_PASSWORD=… deploy/mosquitto/passwords.sh /etc/mosquitto/audio/passwords hub kitchen-hub
set -euo pipefail

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
fail() {
    echo "passwords.sh: $*" >&2
    exit 1
}

[ $# -ge 2 ] || usage
file=$1
role=$2
shift 2

case $role in
    hub)
        [ $# -eq 1 ] || usage
        user=$1
        [[ $user =~ ^[A-Za-z0-9_-]{1,64}$ ]] \
            || fail "a hub id is 1 to 64 characters of A-Z a-z 0-9 _ - (got '$user')"
        # The ACL's source rules would apply to this hub too: it would be the playing device with that address.
        [[ ! $user =~ ^[0-9a-f]{12}$ ]] \
            || fail "hub id '$user' has the form of a playing device's address (12 lowercase hex digits); choose another"
        ;;
    source)
        [ $# -eq 1 ] || usage
        address=$(printf '%s' "$1" | tr -d ':' | tr 'A-F' 'a-f')
        [[ $address =~ ^[0-9a-f]{12}$ ]] \
            || fail "a playing device is named by its Bluetooth address, 12:34:56:78:9A:BC or 123456789abc (got '$1')"
        user=$address
        ;;
    bridge)
        [ $# -eq 0 ] || usage
        user=bridge.audio
        ;;
    home-automation)
        [ $# -eq 0 ] || usage
        user=home.automation
        ;;
    remove)
        [ $# -eq 1 ] || usage
        [ -f "$file" ] || fail "$file does not exist"
        mosquitto_passwd -D "$file" "$1"
        echo "removed $1 from $file" >&2
        exit 0
        ;;
    *)
        usage
        ;;
esac

command -v mosquitto_passwd >/dev/null || fail "mosquitto_passwd is missing: apt-get install mosquitto"
if [ ! -e "$file" ]; then
    (umask 077 && : > "$file")
fi

password=${MQTT_PASSWORD:-}
if [ -z "$password" ]; then
    password=$(openssl rand -base64 24 | tr -d '\n')
fi
case $password in
    *$'\n'*) fail "MQTT_PASSWORD must be one line" ;;
esac

# Without -b, mosquitto_passwd reads the password twice from its standard input when that is not a terminal.
printf '%s\n%s\n' "$password" "$password" | mosquitto_passwd "$file" "$user" >/dev/null
echo "$user $password"
