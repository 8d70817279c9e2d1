import AccessoryControl
import AccessoryModel
import AccessoryWire
import ArgumentParser
import Foundation

/// `accessoryctl roles`: the broker's users and their roles, through mosquitto's dynamic security plugin, while the
/// broker runs. Connect as the plugin's admin, its password in ACCESSORYCTL_PASSWORD.
struct Roles: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add the broker's users, each with its role (mosquitto's dynamic security plugin), while it runs.",
        discussion: """
            Log in as the plugin's admin (mosquitto_ctrl dynsec init makes one), with its password in \
            ACCESSORYCTL_PASSWORD. A new user's password is made at random and printed once ("user password"), or \
            read from standard input with --password-stdin: never on a command line. Start with 'roles init'.
            """,
        subcommands: [Init.self, AddHub.self, AddDevice.self, AddBridge.self, AddHomeAutomation.self, Password.self,
                      Remove.self])

    /// The connection, and where the roles' topics are.
    struct Options: ParsableArguments {
        @OptionGroup var connection: ConnectionOptions

        @Option(help: "Home Assistant's discovery prefix, as the bridge's --homeassistant-prefix.")
        var homeassistantPrefix = "homeassistant"

        @Flag(help: "Read the new password from standard input (one line) instead of making one.")
        var passwordStdin = false

        /// Connects as the admin, runs `body`, disconnects; a refusal ends the command with status 1.
        func run(_ body: (BrokerRoles, TopicRoot) async throws -> Void) async throws {
            let root = try connection.root
            let roles = try await connection.connecting {
                try BrokerRoles(
                    mqtt: try connection.mqtt(clientID: ConnectionOptions.clientID("roles")), timeout: connection.patience,
                    logger: ConnectionOptions.logger)
            }
            do {
                try await connection.connecting { try await roles.start(timeout: connection.patience) }
                try await body(roles, root)
                await roles.stop()
            } catch let exit as ExitCode {
                await roles.stop()
                throw exit
            } catch {
                await roles.stop()
                throw fail("\(error)")
            }
        }

        /// The new user's password: from standard input, or made at random (and then printed with the user name).
        func newPassword() throws -> (password: String, made: Bool) {
            guard passwordStdin else {
                var generator = SystemRandomNumberGenerator()
                let bytes = (0..<24).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
                return (Data(bytes).base64EncodedString(), true)
            }
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw fail("--password-stdin: no password on standard input")
            }
            return (line, false)
        }

        /// Says what was added: "user password" when the password was made here, for the client's configuration.
        func report(_ user: String, role: String, password: (password: String, made: Bool)) {
            print(password.made ? "\(user) \(password.password)" : "added \(user) with role \(role)")
        }
    }

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deny what no role grants, and make (or update) the bridge's and home automation's roles.")
        @OptionGroup var options: Options

        func run() async throws {
            try await options.run { roles, root in
                try await roles.setUp(root: root, homeAssistantPrefix: options.homeassistantPrefix)
                print("roles bridge and home-automation ready under \(root) and \(options.homeassistantPrefix)")
            }
        }
    }

    struct AddHub: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-hub", abstract: "Add a hub: its user name is its hub id, its role hub:<id> its own.")
        @OptionGroup var options: Options
        @Argument(help: "The hub id.") var hub: String

        func run() async throws {
            guard let hubID = HubID(hub) else { throw ValidationError("a hub id is \(IdentifierGrammar.description)") }
            let password = try options.newPassword()
            try await options.run { roles, root in
                try await roles.addHub(hubID, password: password.password, root: root)
                options.report(hub, role: BrokerRole.hub(hubID, root: root).name, password: password)
            }
        }
    }

    struct AddDevice: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-device",
            abstract: "Add a playing device: its user name is its address as in its topics (123456789abc).")
        @OptionGroup var options: Options
        @Argument(help: "The device's Bluetooth address, such as 12:34:56:78:9A:BC.") var address: AddressArgument

        func run() async throws {
            let password = try options.newPassword()
            try await options.run { roles, root in
                try await roles.addDevice(address.address, password: password.password, root: root)
                options.report(
                    address.address.topicID, role: BrokerRole.device(address.address, root: root).name, password: password)
            }
        }
    }

    struct AddBridge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-bridge", abstract: "Add the bridge's user, with the role bridge.")
        @OptionGroup var options: Options
        @Argument(help: "Its user name.") var user = "bridge.audio"

        func run() async throws {
            let password = try options.newPassword()
            try await options.run { roles, _ in
                try await roles.addClient(user, password: password.password, role: "bridge")
                options.report(user, role: "bridge", password: password)
            }
        }
    }

    struct AddHomeAutomation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-home-automation",
            abstract: "Add home automation's user (Home Assistant's too), with the role home-automation.")
        @OptionGroup var options: Options
        @Argument(help: "Its user name.") var user = "home.automation"

        func run() async throws {
            let password = try options.newPassword()
            try await options.run { roles, _ in
                try await roles.addClient(user, password: password.password, role: "home-automation")
                options.report(user, role: "home-automation", password: password)
            }
        }
    }

    struct Password: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a user a new password (its connections are closed, and it logs in again with it).")
        @OptionGroup var options: Options
        @Argument(help: "The user name.") var user: String

        func run() async throws {
            let password = try options.newPassword()
            try await options.run { roles, _ in
                try await roles.setPassword(of: user, to: password.password)
                print(password.made ? "\(user) \(password.password)" : "new password for \(user)")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a user, and its own role (a hub's or a device's); its connections are closed.")
        @OptionGroup var options: Options
        @Argument(help: "The user name.") var user: String

        func run() async throws {
            try await options.run { roles, _ in
                try await roles.remove(user)
                print("removed \(user)")
            }
        }
    }
}
